-- Logical requests by what linked them: strong-keyed first attempts from the time table
-- less those of requests in {{.Table}}_attempts (each of the rest is a request of its
-- own), plus the distinct requests of {{.Table}}_attempts.
WITH s AS (
    SELECT linked_by, sum(n) AS firsts
    FROM {{.Table}}_time
    WHERE attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')
    GROUP BY linked_by
),
m AS (
    SELECT linked_by,
        count(*) FILTER (attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')) AS firsts,
        count(DISTINCT lkey) AS logical
    FROM {{.Table}}_attempts
    GROUP BY linked_by
)
SELECT linked_by, coalesce(s.firsts, 0) - coalesce(m.firsts, 0) + coalesce(m.logical, 0)
FROM s FULL JOIN m USING (linked_by)
