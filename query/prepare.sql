{{/*
prepare.sql builds the temporary table every report query reads: the rows of the range
[$1, $2) (and of route $3 when given), each tagged row with the key of its logical request
and what the previous attempt of that request got.

Parameters: $1 since, $2 until, $3 route or NULL, $4 max gap in seconds (heuristic links
and inference), $5 infer attempts for untagged rows.

Linking (SPEC "logical request"): Idempotency-Key, then amz-sdk-invocation-id, then
X-Request-Id; rows with none of them link by the heuristic key (client address, user
agent, method, URI): attempt numbers increase and consecutive attempts are at most $4
seconds apart (from the previous end to this start).

Inference (--infer-attempts): an untagged row repeats the previous row of the same
heuristic key when that one got a retryable failure (5xx, 429, 408, 499, 0) and this one
started at most $4 seconds after it ended; its attempt number counts the repeats.
*/}}
{{define "prepare.sql"}}
CREATE TEMP TABLE {{.Table}} AS
WITH base AS (
    SELECT file_id, line, ts, remote_addr, user_agent, method, uri, route, host, upstream_addr,
           status, upstream_status, idempotency_key, invocation_id, request_id, retry_after,
           attempt AS logged_attempt,
           ts - to_microseconds(CAST(coalesce(request_time, 0) * 1000000 AS BIGINT)) AS started
    FROM requests
    WHERE ($1::TIMESTAMP IS NULL OR ts >= $1::TIMESTAMP)
      AND ($2::TIMESTAMP IS NULL OR ts <  $2::TIMESTAMP)
      AND ($3::VARCHAR IS NULL OR route = $3::VARCHAR)
),
-- Inference, over untagged rows only (none unless $5).
u AS (
    SELECT *,
        CASE WHEN lag(ts) OVER hk IS NULL
               OR epoch(started) - epoch(lag(ts) OVER hk) > $4
               OR NOT coalesce(lag(status) OVER hk IN (0, 408, 429, 499) OR lag(status) OVER hk >= 500, false)
             THEN 1 ELSE 0 END AS new_chain
    FROM base
    WHERE logged_attempt IS NULL AND $5::BOOLEAN
    WINDOW hk AS (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, line)
),
uc AS (
    SELECT *, sum(new_chain) OVER (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, line
                                   ROWS UNBOUNDED PRECEDING) AS chain
    FROM u
),
ui AS (
    SELECT * EXCLUDE (new_chain, chain),
        CAST(row_number() OVER (PARTITION BY remote_addr, user_agent, method, uri, chain ORDER BY ts, line) - 1 AS INTEGER) AS attempt,
        true AS inferred,
        'h:' || hash(remote_addr, user_agent, method, uri) || ':' || chain AS lkey,
        'inferred' AS linked_by
    FROM uc
),
-- Tagged rows with a strong key.
st AS (
    SELECT *, logged_attempt AS attempt, false AS inferred,
        coalesce('k:' || idempotency_key, 'a:' || invocation_id, 'r:' || request_id) AS lkey,
        CASE WHEN idempotency_key IS NOT NULL THEN 'idempotency_key'
             WHEN invocation_id IS NOT NULL THEN 'invocation_id'
             ELSE 'request_id' END AS linked_by
    FROM base
    WHERE logged_attempt IS NOT NULL
      AND (idempotency_key IS NOT NULL OR invocation_id IS NOT NULL OR request_id IS NOT NULL)
),
-- Tagged rows without one: the heuristic.
h AS (
    SELECT *,
        CASE WHEN lag(ts) OVER hk IS NULL
               OR logged_attempt = 0
               OR logged_attempt <= lag(logged_attempt) OVER hk
               OR epoch(started) - epoch(lag(ts) OVER hk) > $4
             THEN 1 ELSE 0 END AS new_chain
    FROM base
    WHERE logged_attempt IS NOT NULL
      AND idempotency_key IS NULL AND invocation_id IS NULL AND request_id IS NULL
    WINDOW hk AS (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, logged_attempt, line)
),
hc AS (
    SELECT * EXCLUDE (new_chain),
        logged_attempt AS attempt, false AS inferred,
        'h:' || hash(remote_addr, user_agent, method, uri) || ':' ||
            sum(new_chain) OVER (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, logged_attempt, line
                                 ROWS UNBOUNDED PRECEDING) AS lkey,
        'heuristic' AS linked_by
    FROM h
),
-- Untagged rows that stay untagged.
un AS (
    SELECT *, NULL::INTEGER AS attempt, false AS inferred, NULL::VARCHAR AS lkey, NULL::VARCHAR AS linked_by
    FROM base
    WHERE logged_attempt IS NULL AND NOT $5::BOOLEAN
),
t AS (
    SELECT * FROM st UNION ALL BY NAME SELECT * FROM hc UNION ALL BY NAME SELECT * FROM ui
)
SELECT *,
    lag(status)      OVER w AS prev_status,
    lag(ts)          OVER w AS prev_end,
    lag(retry_after) OVER w AS prev_retry_after,
    -- Retry-After is seconds or an HTTP-date.
    coalesce(TRY_CAST(lag(retry_after) OVER w AS DOUBLE),
             epoch(try_strptime(lag(retry_after) OVER w, '%a, %d %b %Y %H:%M:%S GMT')) - epoch(lag(ts) OVER w)) AS prev_retry_secs,
    first_value(status)          OVER w AS first_status,
    first_value(upstream_status) OVER w AS first_upstream_status,
    first_value(attempt)         OVER w AS first_n,
    -- how findings name a logical request: its key as logged, else where it was seen
    coalesce(idempotency_key, invocation_id, request_id,
             coalesce(method, '') || ' ' || coalesce(uri, '') || ' at ' || strftime(ts, '%Y-%m-%dT%H:%M:%SZ')) AS example
FROM t
WINDOW w AS (PARTITION BY lkey ORDER BY attempt, ts)
UNION ALL BY NAME
SELECT * FROM un
{{end}}
