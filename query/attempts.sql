{{/*
The tagged attempts of the range [$1, $2), each with the key of its logical request
(SPEC "logical request": idempotency key, AWS invocation id, client-propagated request id;
a line with none of them is, for now, a logical request of its own), its start
(end − request_time) and what the previous attempt of the same logical request got.
*/}}
{{define "attempts"}}
a AS (
    SELECT *,
        coalesce(idempotency_key, invocation_id, request_id, 'line:' || file_id || ':' || line) AS lkey,
        ts - to_microseconds(CAST(coalesce(request_time, 0) * 1000000 AS BIGINT)) AS started
    FROM requests
    WHERE attempt IS NOT NULL
      AND ($1::TIMESTAMP IS NULL OR ts >= $1::TIMESTAMP)
      AND ($2::TIMESTAMP IS NULL OR ts <  $2::TIMESTAMP)
),
s AS (
    SELECT *,
        lag(status)      OVER w AS prev_status,
        lag(ts)          OVER w AS prev_end,
        lag(retry_after) OVER w AS prev_retry_after,
        -- Retry-After is seconds or an HTTP-date.
        coalesce(TRY_CAST(lag(retry_after) OVER w AS DOUBLE),
                 epoch(try_strptime(lag(retry_after) OVER w, '%a, %d %b %Y %H:%M:%S GMT')) - epoch(lag(ts) OVER w)) AS prev_retry_secs,
        first_value(status)          OVER w AS first_status,
        first_value(upstream_status) OVER w AS first_upstream_status,
        first_value(attempt)         OVER w AS first_n
    FROM a
    WINDOW w AS (PARTITION BY lkey ORDER BY attempt, ts)
)
{{end}}
