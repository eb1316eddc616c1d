-- The longest 429 loops (of the throttling statuses, see loops.sql): the logical request, its route, when the loop started and how
-- many consecutive 429s it got. $1 is how many to return.
WITH r AS (
    SELECT lkey, coalesce(idempotency_key, invocation_id, request_id, coalesce(method, '-') || ' ' || coalesce(uri, '-')) AS example,
           route, ts, attempt - row_number() OVER (PARTITION BY lkey ORDER BY attempt, ts) AS grp
    FROM {{.Table}}_attempts
    WHERE status IN ({{.Throttle}})
),
runs AS (
    SELECT any_value(example) AS example, any_value(route) AS route, min(ts) AS start, count(*) AS len
    FROM r
    GROUP BY lkey, grp
    HAVING count(*) >= 2
)
SELECT example, coalesce(route, ''), start, len
FROM runs
ORDER BY len DESC, start, example
LIMIT $1
