-- The row metrics of SPEC.md, defined once for any grouping. {{.Key}} is a grouping
-- expression over a row, chosen by the program (never by the user); {{.Table}} is the
-- prepared table (prepare.sql). Tagged rows only, except requests and untagged.
WITH r AS (
    SELECT {{.Key}} AS k, attempt, status, inferred, upstream_tries,
           linked_by IN ('idempotency_key', 'invocation_id', 'request_id') AS strong
    FROM {{.Table}}
), c AS (
    SELECT
        k,
        count(*)                                                      AS requests,
        count(*) FILTER (attempt IS NULL)                             AS untagged,
        count(*) FILTER (inferred)                                    AS inferred,
        count(*) FILTER (attempt IS NOT NULL)                         AS tagged,
        count(*) FILTER (attempt = 0)                                 AS first_attempts,
        count(*) FILTER (attempt >= 1)                                AS retries,
        count(*) FILTER (attempt = 1)                                 AS second_attempts,
        count(*) FILTER (attempt >= 1 AND status BETWEEN 200 AND 299) AS retries_ok,
        count(*) FILTER (attempt IS NOT NULL AND status BETWEEN 200 AND 299) AS tagged_ok,
        count(*) FILTER (attempt = 0 AND status BETWEEN 500 AND 599)  AS status_5xx_first,
        count(*) FILTER (attempt >= 1 AND status BETWEEN 500 AND 599) AS status_5xx_retry,
        count(*) FILTER (attempt = 0 AND status = 429)                AS status_429_first,
        count(*) FILTER (attempt >= 1 AND status = 429)               AS status_429_retry,
        count(*) FILTER (attempt = 0 AND status = 499)                AS status_499_first,
        count(*) FILTER (attempt >= 1 AND status = 499)               AS status_499_retry,
        -- proxy tries (the gateway's own retries: nginx's upstream lists), never mixed
        -- with client attempts: lines that record them, and the tries they made
        count(upstream_tries)                                         AS proxied,
        coalesce(sum(upstream_tries), 0)                              AS upstream_tries,
        -- for logical.sql: first attempts linked by a strong key, and those answered 2xx
        count(*) FILTER (attempt = 0 AND strong)                      AS strong_firsts,
        count(*) FILTER (attempt = 0 AND strong AND status BETWEEN 200 AND 299) AS strong_firsts_ok
    FROM r
    GROUP BY k
)
SELECT
    k, requests, untagged, inferred, first_attempts, retries,
    tagged::DOUBLE / nullif(first_attempts, 0)          AS amplification,
    second_attempts::DOUBLE / nullif(first_attempts, 0) AS retry_rate,
    retries_ok::DOUBLE / nullif(retries, 0)             AS retry_success_rate,
    retries::DOUBLE / nullif(tagged, 0)                 AS extra_load,
    tagged_ok::DOUBLE / nullif(tagged, 0)               AS actual_success,
    status_5xx_first, status_5xx_retry,
    status_429_first, status_429_retry,
    status_499_first, status_499_retry,
    upstream_tries::DOUBLE / nullif(proxied, 0)          AS proxy_amplification,
    strong_firsts, strong_firsts_ok
FROM c
ORDER BY k
