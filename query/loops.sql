-- 429 feedback loops (docs/metrics.md): the merge of the partial answers per minute of
-- first attempt (loops_partial, below), with the share of retries among the throttled
-- answers from the time table. $1: how many of the longest loops to name.
SELECT
    coalesce(sum(loops), 0)::BIGINT                  AS loops,
    coalesce(max(max_length), 0)::BIGINT             AS max_length,
    coalesce(sum(premature_retries), 0)::BIGINT      AS premature_retries,
    coalesce(sum(blind_retries), 0)::BIGINT          AS blind_retries,
    coalesce(sum(unparsable_retry_after), 0)::BIGINT AS unparsable_retry_after,
    (SELECT coalesce(sum(n) FILTER (attempt >= 1 AND status IN ({{.Throttle}})), 0)::DOUBLE
          / nullif(sum(n) FILTER (attempt IS NOT NULL AND status IN ({{.Throttle}})), 0)
     FROM {{.Table}}_time) AS retry_429_share,
    coalesce((SELECT list(w ORDER BY w.length DESC, w.start, w.request, w.route)
              FROM (SELECT unnest(worst) AS w FROM {{.Part "loops"}} WHERE {{.Within}})), [])[1:$1] AS worst
FROM {{.Part "loops"}}
WHERE {{.Within}}

{{/* A loop is a logical request with two or more consecutive attempts throttled: answered
a throttling status (429 unless --throttle-status says more: .Throttle, a list of integers
the program formats) or a throttling error code (query.ThrottleCodes: a 400
ThrottlingException); consecutive ones share attempt − rank. Per minute of first attempt:
the requests with a loop, the longest loop, the retries sent before the Retry-After had
passed (a hedge was sent before the answer it would have waited on), after a throttled
answer without one, after one that could not be read, and the $1 longest loops, longest
first, each with the request (its key as logged), its route, when the loop started and its
length. */}}
{{define "loops_partial"}}
WITH a AS NOT MATERIALIZED (
    SELECT {{minute "first_ts"}} AS minute, lkey, key_text, method, uri, route, ts, attempt, status, error_code, hedge,
        started, prev_end, prev_status, prev_error_code, prev_retry_after, prev_retry_secs
    FROM {{.Table}}_attempts WHERE {{.Touched}}
),
r AS (
    SELECT minute, lkey, key_text, coalesce(method, '-') || ' ' || coalesce(uri, '-') AS call,
           route, ts, attempt - row_number() OVER (PARTITION BY lkey ORDER BY attempt, ts) AS grp
    FROM a
    WHERE status IN ({{.Throttle}}) OR {{throttleCode "error_code"}}
),
runs AS (
    -- named by its key (the text any of its retries stores), or by method and URI
    SELECT any_value(minute) AS minute, lkey, coalesce(any_value(key_text), any_value(call)) AS example,
           coalesce(any_value(route), '') AS route, min(ts) AS start, count(*) AS len
    FROM r
    GROUP BY lkey, grp
    HAVING count(*) >= 2
),
rm AS (
    SELECT minute, count(DISTINCT lkey) AS loops, max(len) AS max_length,
           list({'request': example, 'route': route, 'start': start, 'length': len} ORDER BY len DESC, start, example, route)[1:$1] AS worst
    FROM runs
    GROUP BY minute
),
am AS (
    SELECT minute,
        count(*) FILTER (attempt >= 1 AND NOT hedge AND prev_retry_secs IS NOT NULL
                         AND started < prev_end + to_microseconds(CAST(prev_retry_secs * 1000000 AS BIGINT))) AS premature_retries,
        count(*) FILTER (attempt >= 1 AND NOT hedge AND (prev_status IN ({{.Throttle}}) OR {{throttleCode "prev_error_code"}})
                         AND prev_retry_after IS NULL) AS blind_retries,
        count(*) FILTER (attempt >= 1 AND NOT hedge AND prev_retry_after IS NOT NULL AND prev_retry_secs IS NULL) AS unparsable_retry_after
    FROM a
    GROUP BY minute
)
SELECT minute, coalesce(rm.loops, 0)::BIGINT AS loops, coalesce(rm.max_length, 0)::BIGINT AS max_length,
    premature_retries, blind_retries, unparsable_retry_after,
    coalesce(rm.worst, []) AS worst
FROM am LEFT JOIN rm USING (minute)
ORDER BY minute
{{end}}
