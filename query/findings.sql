-- Policy findings (SPEC "Policy findings"): each row of f is one retry attempt that a good
-- client would not have made. count is logical requests, attempts is retry attempts.
-- $1 is the policy cap on attempts (--max-attempts): attempt numbers >= $1 are over it.
WITH f AS (
    -- retried POST/PATCH without an idempotency key
    SELECT 'duplicate_write_risk' AS kind, lkey, example FROM {{.Table}}_multi
    WHERE attempt >= 1 AND upper(method) IN ('POST', 'PATCH') AND idempotency_key IS NULL
    UNION ALL
    -- a write whose first attempt the client abandoned (499, Caddy's 0, or a 504 the
    -- upstream answered 2xx), then a retry that succeeded: the write may have happened
    -- twice. An idempotency key is what lets the server tell, so keyed writes are left out.
    SELECT 'false_success', lkey, example FROM {{.Table}}_multi
    WHERE attempt >= 1 AND status BETWEEN 200 AND 299 AND first_n = 0 AND idempotency_key IS NULL
      AND upper(method) IN ('POST', 'PUT', 'PATCH', 'DELETE')
      AND (first_status IN (0, 499) OR (first_status = 504 AND first_upstream_status LIKE '2%'))
    UNION ALL
    SELECT 'non_retryable_retry', lkey, example FROM {{.Table}}_multi
    WHERE attempt >= 1 AND prev_status IN (400, 401, 403, 404, 422)
    UNION ALL
    SELECT 'over_cap', lkey, example FROM {{.Table}}_multi
    WHERE attempt >= $1
)
SELECT kind, count(DISTINCT lkey) AS count, count(*) AS attempts,
       list_slice(list_sort(list(DISTINCT example)), 1, 3) AS examples
FROM f
GROUP BY kind
ORDER BY kind
