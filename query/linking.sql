-- Logical requests by what linked them: strong-keyed first attempts from the time table
-- less those of requests in the attempts table (each of the rest is a request of its own),
-- plus the requests of the attempts table, each counted once, by its one row without a
-- previous attempt (a filter, where count(DISTINCT lkey) hashed every key) and under that
-- row's way of linking (linking_partial). With them, per way of linking, the retries (time
-- table) and the orphans: retries with no earlier attempt to link to (a first attempt
-- outside the range or never logged, a chain the heuristic could not start), and the first
-- attempts logged without the attempt header that a tagged retry's key made first attempts
-- (prepare_rows: keyed_first); and the retries the heuristic linked after an attempt logged
-- 2xx (hlink_level: after_2xx).
WITH s AS (
    SELECT linked_by,
        coalesce(sum(n) FILTER (attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')), 0) AS firsts,
        coalesce(sum(n) FILTER (attempt >= 1), 0) AS retries,
        coalesce(sum(n) FILTER (attempt = 0 AND strong AND inferred), 0) AS untagged_firsts
    FROM {{.Table}}_time
    WHERE linked_by IS NOT NULL
    GROUP BY linked_by
),
m AS (
    SELECT linked_by, sum(firsts) AS firsts, sum(logical) AS logical, sum(orphans) AS orphans, sum(after_2xx) AS after_2xx
    FROM {{.Part "linking"}}
    WHERE {{.Within}}
    GROUP BY linked_by
)
SELECT linked_by, (coalesce(s.firsts, 0) - coalesce(m.firsts, 0) + coalesce(m.logical, 0))::BIGINT,
    coalesce(s.retries, 0)::BIGINT, coalesce(m.orphans, 0)::BIGINT, coalesce(s.untagged_firsts, 0)::BIGINT,
    coalesce(m.after_2xx, 0)::BIGINT
FROM s FULL JOIN m USING (linked_by)

{{define "linking_partial"}}
SELECT {{minute "first_ts"}} AS minute, linked_by,
    count(*) FILTER (attempt = 0 AND linked_by IN ('idempotency_key', 'invocation_id', 'request_id')) AS firsts,
    count(*) FILTER (prev_end IS NULL) AS logical,
    count(*) FILTER (attempt >= 1 AND prev_end IS NULL) AS orphans,
    count(*) FILTER (after_2xx) AS after_2xx
FROM {{.Table}}_attempts WHERE {{.Touched}}
GROUP BY ALL
ORDER BY minute, linked_by
{{end}}
