-- Logical requests by their number of attempts: the requests of the attempts table
-- (attempt_counts_partial), and the strong-keyed requests with no retry, one attempt each
-- (the strong first attempts of the time table less those in the attempts table:
-- linking.sql counts them the same way). The counts add up to the logical requests of
-- linking.sql.
WITH per AS (
    SELECT n, sum(requests) AS requests FROM {{.Part "attempt_counts"}} WHERE {{.Within}} GROUP BY n
),
single AS (
    SELECT (SELECT coalesce(sum(n), 0) FROM {{.Table}}_time WHERE attempt = 0 AND strong)
         - (SELECT coalesce(sum(strong_firsts), 0) FROM {{.Part "attempt_counts"}} WHERE {{.Within}}) AS n
)
SELECT n, sum(requests)::BIGINT FROM (
    SELECT n, requests FROM per
    UNION ALL
    SELECT 1, n FROM single WHERE n > 0
)
GROUP BY n
ORDER BY n

{{/* Per minute of first attempt: the requests of the attempts table by their number of
attempts, and their strong first attempts. */}}
{{define "attempt_counts_partial"}}
WITH per AS (
    SELECT {{minute "first_ts"}} AS minute, lkey, count(*) AS n, count(*) FILTER (attempt = 0 AND strong) AS sf
    FROM {{.Table}}_attempts WHERE {{.Touched}}
    GROUP BY minute, lkey
)
SELECT minute, n, count(*)::BIGINT AS requests, sum(sf)::BIGINT AS strong_firsts
FROM per
GROUP BY minute, n
ORDER BY minute, n
{{end}}
