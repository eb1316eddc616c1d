-- Logical requests by what linked them: strong-keyed single first attempts from the rows,
-- plus the distinct requests of {{.Table}}_multi.
WITH s AS (
    SELECT linked_by, {{if .Cube}}sum(n){{else}}count(*){{end}} AS firsts
    FROM {{or .Cube .Table}}
    WHERE attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')
    GROUP BY linked_by
),
m AS (
    SELECT linked_by,
        count(*) FILTER (attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')) AS firsts,
        count(DISTINCT lkey) AS logical
    FROM {{.Table}}_multi
    GROUP BY linked_by
)
SELECT linked_by, coalesce(s.firsts, 0) - coalesce(m.firsts, 0) + coalesce(m.logical, 0)
FROM s FULL JOIN m USING (linked_by)
