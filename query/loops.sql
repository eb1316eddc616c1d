-- 429 feedback loops (docs/metrics.md). A loop is a logical request with two or
-- more consecutive attempts answered 429; consecutive 429s share attempt − rank.
WITH r AS (
    SELECT lkey, attempt - row_number() OVER (PARTITION BY lkey ORDER BY attempt, ts) AS grp
    FROM {{.Table}}_attempts
    WHERE status = 429
),
runs AS (
    SELECT lkey, count(*) AS len FROM r GROUP BY lkey, grp HAVING count(*) >= 2
)
SELECT
    (SELECT count(DISTINCT lkey) FROM runs)    AS loops,
    (SELECT coalesce(max(len), 0) FROM runs)   AS max_length,
    count(*) FILTER (attempt >= 1 AND prev_retry_secs IS NOT NULL
                     AND started < prev_end + to_microseconds(CAST(prev_retry_secs * 1000000 AS BIGINT))) AS premature_retries,
    count(*) FILTER (attempt >= 1 AND prev_status = 429 AND prev_retry_after IS NULL)                  AS blind_retries,
    (SELECT coalesce(sum(n) FILTER (attempt >= 1 AND status = 429), 0)::DOUBLE / nullif(sum(n) FILTER (attempt IS NOT NULL AND status = 429), 0)
     FROM {{.Table}}_time) AS retry_429_share
FROM {{.Table}}_attempts
