-- The first $1 groups of {{.Key}} with retries in the order a table shows them (most
-- retries, then most requests, then by key: sortGroups), by metrics.sql's retries and
-- requests, and how many groups have retries: a table of 100K routes shows ten, and only
-- those ten are counted in full. {{.Counts}} is the Set's groups table, or the stored
-- route totals (route_totals) when the Set is every row of the stored cache.
SELECT k, count(*) OVER () AS retried
FROM (
    SELECT {{.Key}} AS k, coalesce(sum(n) FILTER (attempt >= 1), 0) AS retries, sum(n) AS requests
    FROM {{.Counts}}
    GROUP BY k
)
WHERE retries > 0
ORDER BY retries DESC, requests DESC, k
LIMIT $1

{{/* The counts of each route of the groups table {{.Counts}} by what metrics.sql reads of
them (attempts from the third on are one class there): what the cache stores per route
(cache_routes). */}}
{{define "route_totals"}}
SELECT method, route, CASE WHEN attempt >= 2 THEN 2 ELSE attempt END AS attempt, status, inferred, strong, cancelled,
    sum(n)::BIGINT AS n, sum(proxied)::BIGINT AS proxied, sum(tries)::BIGINT AS tries,
    sum(gw_retried)::BIGINT AS gw_retried, sum(below_cap)::BIGINT AS below_cap,
    sum(uncoded)::BIGINT AS uncoded
FROM {{.Counts}}
GROUP BY ALL
{{end}}
