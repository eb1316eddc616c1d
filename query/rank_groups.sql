-- The first $1 groups of {{.Key}} with retries in the order a table shows them (most
-- retries, then most requests, then by key: sortGroups), by metrics.sql's retries and
-- requests, and how many groups have retries: a table of 100K routes shows ten, and only
-- those ten are counted in full.
SELECT k, count(*) OVER () AS retried
FROM (
    SELECT {{.Key}} AS k, coalesce(sum(n) FILTER (attempt >= 1), 0) AS retries, sum(n) AS requests
    FROM {{.Counts}}
    GROUP BY k
)
WHERE retries > 0
ORDER BY retries DESC, requests DESC, k
LIMIT $1
