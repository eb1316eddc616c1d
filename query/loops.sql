-- 429 feedback loops (docs/metrics.md). A loop is a logical request with two or
-- more consecutive attempts throttled: answered a throttling status (429 unless
-- --throttle-status says more: .Throttle, a list of integers the program formats) or a
-- throttling error code (query.ThrottleCodes: a 400 ThrottlingException); consecutive
-- ones share attempt − rank. worst: the $1 longest loops, longest first, each with the logical
-- request (its key as logged), its route, when the loop started and its length.
WITH r AS (
    SELECT lkey, key_text, coalesce(method, '-') || ' ' || coalesce(uri, '-') AS call,
           route, ts, attempt - row_number() OVER (PARTITION BY lkey ORDER BY attempt, ts) AS grp
    FROM {{.Table}}_attempts
    WHERE status IN ({{.Throttle}}) OR {{throttleCode "error_code"}}
),
runs AS (
    -- named by its key (the text any of its retries stores), or by method and URI
    SELECT lkey, coalesce(any_value(key_text), any_value(call)) AS example, coalesce(any_value(route), '') AS route, min(ts) AS start, count(*) AS len
    FROM r
    GROUP BY lkey, grp
    HAVING count(*) >= 2
)
SELECT
    (SELECT count(DISTINCT lkey) FROM runs)    AS loops,
    (SELECT coalesce(max(len), 0) FROM runs)   AS max_length,
    -- (a hedge was sent before the answer it would have waited on)
    count(*) FILTER (attempt >= 1 AND NOT hedge AND prev_retry_secs IS NOT NULL
                     AND started < prev_end + to_microseconds(CAST(prev_retry_secs * 1000000 AS BIGINT))) AS premature_retries,
    count(*) FILTER (attempt >= 1 AND NOT hedge AND (prev_status IN ({{.Throttle}}) OR {{throttleCode "prev_error_code"}})
                     AND prev_retry_after IS NULL) AS blind_retries,
    count(*) FILTER (attempt >= 1 AND NOT hedge AND prev_retry_after IS NOT NULL AND prev_retry_secs IS NULL)  AS unparsable_retry_after,
    (SELECT coalesce(sum(n) FILTER (attempt >= 1 AND status IN ({{.Throttle}})), 0)::DOUBLE
          / nullif(sum(n) FILTER (attempt IS NOT NULL AND status IN ({{.Throttle}})), 0)
     FROM {{.Table}}_time) AS retry_429_share,
    (SELECT coalesce(list({'request': example, 'route': route, 'start': start, 'length': len} ORDER BY len DESC, start, example), [])
     FROM (SELECT * FROM runs ORDER BY len DESC, start, example LIMIT $1)) AS worst
FROM {{.Table}}_attempts
