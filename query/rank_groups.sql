-- The first $1 groups of {{.Key}} with retries in the order a table shows them (most
-- retries, then most requests, then by key: sortGroups), by metrics.sql's retries and
-- requests, and how many groups have retries: a table of 100K routes shows ten, and only
-- those ten are counted in full. From the stored totals per route (.Totals) when the
-- Set is every row of the stored cache, else from its groups table.
SELECT k, count(*) OVER () AS retried
FROM (
    {{- if .Totals}}
    SELECT k, retries, requests FROM {{.Totals}}
    {{- else}}
    {{template "group_totals" .}}
    {{- end}}
)
WHERE retries > 0
ORDER BY retries DESC, requests DESC, k
LIMIT $1

{{/* The retries and requests of each group of {{.Key}} in {{.Counts}}: what the ranking
reads, and what the cache stores per route (cache_routes), kept by adding and taking out
the counts of the rows an update links again. */}}
{{define "group_totals"}}
SELECT {{.Key}} AS k, coalesce(sum(n) FILTER (attempt >= 1), 0)::BIGINT AS retries, sum(n)::BIGINT AS requests
FROM {{.Counts}}
GROUP BY k
{{end}}
