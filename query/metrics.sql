-- The row metrics of docs/metrics.md, defined once for any grouping, from a row count
-- table (prepare.sql): {{.Counts}} is the time table or the groups table, {{.Key}} a
-- grouping expression over its columns, chosen by the program (never by the user).
-- Tagged rows only, except requests and untagged.
WITH g AS (
    -- counts per group, attempt class (NULL, 0, 1, 2 for two and more), status and flags:
    -- the metrics below read these few thousand rows
    SELECT {{.Key}} AS k, CASE WHEN attempt >= 2 THEN 2 ELSE attempt END AS attempt, status, inferred, strong, cancelled,
           sum(n) AS n, sum(proxied) AS proxied, sum(tries) AS tries, sum(gw_retried) AS gw_retried, sum(below_cap) AS below_cap,
           sum(uncoded) AS uncoded
    FROM {{.Counts}}
    GROUP BY ALL
), c AS (
    SELECT
        k,
        sum(n)                                                      AS requests,
        coalesce(sum(n) FILTER (attempt IS NULL), 0)                AS untagged,
        coalesce(sum(n) FILTER (inferred AND NOT strong), 0)        AS inferred, -- --infer-attempts
        coalesce(sum(n) FILTER (attempt IS NOT NULL), 0)            AS tagged,
        coalesce(sum(n) FILTER (attempt = 0), 0)                    AS first_attempts,
        coalesce(sum(n) FILTER (attempt >= 1), 0)                   AS retries,
        coalesce(sum(n) FILTER (attempt = 1), 0)                    AS second_attempts,
        coalesce(sum(n) FILTER (attempt >= 1 AND status BETWEEN 200 AND 299), 0) AS retries_ok,
        coalesce(sum(n) FILTER (attempt IS NOT NULL AND status BETWEEN 200 AND 299), 0) AS tagged_ok,
        coalesce(sum(n) FILTER (attempt = 0 AND status BETWEEN 500 AND 599), 0)  AS status_5xx_first,
        coalesce(sum(n) FILTER (attempt >= 1 AND status BETWEEN 500 AND 599), 0) AS status_5xx_retry,
        coalesce(sum(n) FILTER (attempt = 0 AND status = 429), 0)   AS status_429_first,
        coalesce(sum(n) FILTER (attempt >= 1 AND status = 429), 0)  AS status_429_retry,
        coalesce(sum(n) FILTER (attempt = 0 AND status = 499), 0)   AS status_499_first,
        coalesce(sum(n) FILTER (attempt >= 1 AND status = 499), 0)  AS status_499_retry,
        -- abandoned: the client gave up before the answer (nginx's 499, Caddy's and Envoy's 0)
        coalesce(sum(n) FILTER (attempt = 0 AND status IN (0, 499)), 0)  AS abandoned_first,
        coalesce(sum(n) FILTER (attempt >= 1 AND status IN (0, 499)), 0) AS abandoned_retry,
        -- proxy tries (the gateway's own retries: nginx's upstream lists), never mixed
        -- with client attempts: lines that record them, and the tries they made
        sum(proxied)                                                AS proxied,
        coalesce(sum(tries), 0)                                     AS upstream_tries,
        -- first attempts answered 2xx after the gateway's own retries: requests the
        -- gateway recovered (docs/metrics.md, "Layers")
        coalesce(sum(gw_retried) FILTER (attempt = 0 AND status BETWEEN 200 AND 299), 0) AS gateway_recovered,
        -- for logical.sql: first attempts linked by a strong key, and those answered 2xx
        coalesce(sum(n) FILTER (attempt = 0 AND strong), 0)         AS strong_firsts,
        coalesce(sum(n) FILTER (attempt = 0 AND strong AND status BETWEEN 200 AND 299), 0) AS strong_firsts_ok,
        coalesce(sum(below_cap) FILTER (attempt = 0 AND strong), 0)  AS strong_firsts_denied,
        -- attempts that stopped below their stated cap on an answer their SDK retries by
        -- the code alone, without it in the log: budget_denied cannot judge them
        coalesce(sum(uncoded), 0)                                    AS uncoded,
        -- abandoned because another attempt of the request won (prepare_multi): not failures
        coalesce(sum(n) FILTER (attempt = 0 AND cancelled), 0)      AS cancelled_first,
        coalesce(sum(n) FILTER (attempt >= 1 AND cancelled), 0)     AS cancelled_retry
    FROM g
    GROUP BY k
)
-- Counts only: Go computes the ratios (metrics.go), so that windows can be summed. As
-- BIGINT: DuckDB sums to a 128-bit HUGEINT, which the driver reads slowly through math/big.
SELECT
    k,
    COLUMNS(c.* EXCLUDE (k))::BIGINT
FROM c
ORDER BY k
