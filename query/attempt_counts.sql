-- Logical requests by their number of attempts: every request of {{.Table}}_attempts, and
-- the strong-keyed requests with no retry, one attempt each (the strong first attempts of
-- the time table less those in _attempts: linking.sql counts them the same way). The
-- counts add up to the logical requests of linking.sql.
WITH per AS (
    SELECT count(*) AS n FROM {{.Table}}_attempts GROUP BY lkey
),
single AS (
    SELECT (SELECT coalesce(sum(n), 0) FROM {{.Table}}_time WHERE attempt = 0 AND strong)
         - (SELECT count(*) FROM {{.Table}}_attempts WHERE attempt = 0 AND strong) AS n
)
SELECT n, sum(requests)::BIGINT FROM (
    SELECT n, count(*) AS requests FROM per GROUP BY n
    UNION ALL
    SELECT 1, n FROM single WHERE n > 0
)
GROUP BY n
ORDER BY n
