-- Logical requests by their number of attempts: the strong-keyed requests with no retry
-- (one row each, absent from {{.Table}}_multi), and every request of {{.Table}}_multi.
-- The counts add up to the logical requests of linking.sql, the attempts to the tagged
-- (and inferred) rows.
WITH per AS (
    SELECT lkey, count(*) AS n FROM {{.Table}}_multi GROUP BY lkey
    UNION ALL
    SELECT lkey, count(*) AS n
    FROM {{.Table}}
    WHERE attempt IS NOT NULL AND strong
      AND lkey NOT IN (SELECT lkey FROM {{.Table}}_multi)
    GROUP BY lkey
)
SELECT n, count(*) FROM per GROUP BY n ORDER BY n
