-- Policy findings (docs/metrics.md): the merge of the partial findings per minute of first
-- attempt (findings_partial, below), and the synchronised retries, which only the whole
-- range's gaps can tell (gaps_partial): for an attempt number with at least 10 retries
-- that waited, 3 in 4 or more came within 3 ms of the median gap; the retries near it are
-- listed. count is logical requests, attempts is retry attempts, examples the three
-- smallest distinct ones, each request named by its smallest (its first retry involved).
WITH p AS (
    SELECT kind, sum(count)::BIGINT AS count, sum(attempts)::BIGINT AS attempts,
        list_sort(list_distinct(flatten(list(examples))))[1:3] AS examples
    FROM {{.Part "findings"}}
    WHERE {{.Within}}
    GROUP BY kind
),
g AS MATERIALIZED (
    SELECT attempt, gap_ms FROM {{.Part "gaps"}}
    WHERE {{.Within}} AND file_id NOT IN (SELECT file_id FROM {{.Table}}_coarse) -- 3 ms means nothing to a clock of seconds
),
gs AS (
    SELECT attempt, median(gap_ms) AS med, count(*) AS n FROM g GROUP BY attempt
),
gn AS (
    SELECT attempt, count(*) AS near FROM g JOIN gs USING (attempt) WHERE abs(gap_ms - med) <= 3 GROUP BY attempt
),
-- a median under 10 ms is no wait at all (an immediate retry, or a hedge the gateway read
-- only after the first answer), not a backoff without jitter
sync AS (
    SELECT attempt, med FROM gs JOIN gn USING (attempt) WHERE gs.n >= 10 AND gs.med >= 10 AND gn.near >= 0.75 * gs.n
),
s AS (
    SELECT lkey, min({{template "example"}}) AS example, count(*) AS n
    FROM {{.Table}}_attempts JOIN sync USING (attempt)
    WHERE {{template "waited"}} AND file_id NOT IN (SELECT file_id FROM {{.Table}}_coarse)
      AND abs({{template "gap_ms"}} - med) <= 3
    GROUP BY lkey
)
SELECT kind, count, attempts, examples FROM p
UNION ALL
SELECT 'synchronised', count(*), sum(n)::BIGINT, list_sort(list_distinct(list(example)))[1:3] FROM s HAVING count(*) > 0
ORDER BY kind

{{/* Per minute of first attempt, each finding but synchronised: f has one row per retry
attempt that a good client would not have made. $1 is the policy cap on attempts
(--max-attempts): attempt numbers >= $1 are over it, unless the line states the client's
own cap (max_attempts). */}}
{{define "findings_partial"}}
WITH a AS NOT MATERIALIZED (
    SELECT {{minute "first_ts"}} AS minute, lkey, key_text, method, route, uri, ts, attempt, status, error_code, operation,
        idempotency_key, max_attempts, hedge, reused_key, renumbered, prev_status, prev_error_code,
        first_n, first_status, first_upstream_status,
        -- what the log lacks to judge this attempt (docs/metrics.md, "What the log cannot
        -- tell"): whether its POST writes, whether the answer before it was retryable
        {{operationUnknown}} AS op_unknown, {{codeUnknown}} AS code_unknown
    FROM {{.Table}}_attempts WHERE {{.Touched}}
),
-- Writes (docs/metrics.md, "Writes that may have gone through twice"): per attempt of a
-- write (a POST that names a read operation, X-Amz-Target's GetItem, is none), whether an
-- earlier attempt of its request may have written without the client knowing (abandoned:
-- 499, 0; or a 504, the gateway's timeout while the upstream may still work), and whether
-- this one may have reached the handler (any answer but a throttling one: a 429, or a
-- throttling error code, is refused before it). A request is protected only when every
-- attempt that may have reached the handler carried one and the same idempotency key.
w AS (
    SELECT minute, lkey, {{template "example"}} AS example, attempt, status, op_unknown,
        coalesce(bool_or(status IN (0, 499, 504)) OVER (PARTITION BY lkey ORDER BY attempt, ts
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS unknown_before,
        NOT (coalesce(status IN ({{.Throttle}}), false) OR {{throttleCode "error_code"}}) AS reached,
        idempotency_key
    FROM a
    WHERE upper(method) IN ('POST', 'PUT', 'PATCH', 'DELETE') AND NOT {{readOperation "operation"}}
),
unprotected AS (
    SELECT lkey FROM w WHERE reached
    GROUP BY lkey
    HAVING count(*) > count(idempotency_key) OR count(DISTINCT idempotency_key) > 1
),
f AS (
    -- A finding on an attempt the log lacks a field to judge is counted apart, as
    -- 'unjudged:' and its kind (Set.NotJudged).
    -- retried POST/PATCH without an idempotency key
    SELECT {{unjudged "'duplicate_write_risk'" "op_unknown"}} AS kind, minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND upper(method) IN ('POST', 'PATCH') AND NOT {{readOperation "operation"}} AND idempotency_key IS NULL
    UNION ALL
    -- a write whose first attempt the client abandoned (499, Caddy's 0, or a 504 the
    -- upstream answered 2xx), then a retry that succeeded: the write may have happened
    -- twice. An idempotency key is what lets the server tell, so writes it protects (w)
    -- are left out.
    SELECT {{unjudged "'false_success'" "op_unknown"}}, minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND status BETWEEN 200 AND 299 AND first_n = 0 AND lkey IN (SELECT lkey FROM unprotected)
      AND upper(method) IN ('POST', 'PUT', 'PATCH', 'DELETE') AND NOT {{readOperation "operation"}}
      AND (first_status IN (0, 499) OR (first_status = 504 AND first_upstream_status LIKE '2%'))
    UNION ALL
    -- retried PUT/DELETE without an idempotency key: idempotent by contract, yet a server
    -- that does not honour it performs the side effect twice all the same
    SELECT {{unjudged "'retried_idempotent_write'" "op_unknown"}}, minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND upper(method) IN ('PUT', 'DELETE') AND NOT {{readOperation "operation"}} AND idempotency_key IS NULL
    UNION ALL
    -- a write not protected by one key, with an attempt that may have written without the
    -- client knowing, followed by one that may have reached the handler: both may have
    -- been performed
    SELECT {{unjudged "'possible_duplicate_write'" "op_unknown"}}, minute, lkey, example FROM w
    WHERE attempt >= 1 AND unknown_before AND reached AND lkey IN (SELECT lkey FROM unprotected)
    UNION ALL
    -- (a hedge sent before the 404 came back decided nothing on it; a 400 whose error code
    -- the SDKs retry, a ThrottlingException or a RequestTimeout, is retryable: an AWS SDK's
    -- retry after a 400 without its code in the log is not judged)
    SELECT {{unjudged "'non_retryable_retry'" "code_unknown"}}, minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND NOT hedge AND prev_status IN (400, 401, 403, 404, 422) AND NOT {{retryableCode "prev_error_code"}}
    UNION ALL
    -- beyond the cap the client states (amz-sdk-request max=), else the policy's ($1)
    SELECT 'over_cap', minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= coalesce(max_attempts, $1)
    UNION ALL
    -- a key sent on more than one request (two first attempts): linked as if it had none
    SELECT 'reused_key', minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND reused_key
    UNION ALL
    -- attempt numbers that repeat (a header stuck at 1): counted by place
    SELECT 'attempt_number_mismatch', minute, lkey, {{template "example"}} AS example FROM a
    WHERE attempt >= 1 AND renumbered
),
-- per logical request: its rows, and its smallest example
per AS (
    SELECT minute, kind, lkey, count(*) AS n, min(example) AS example FROM f GROUP BY minute, kind, lkey
)
SELECT minute, kind, count(*)::BIGINT AS count, sum(n)::BIGINT AS attempts,
    list_sort(list_distinct(list(example)))[1:3] AS examples
FROM per
GROUP BY minute, kind
ORDER BY minute, kind
{{end}}
