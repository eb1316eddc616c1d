-- The backoff profile: per attempt number n >= 1, the gaps between an attempt's start and
-- the previous attempt's end, in ms (gaps_partial). near_median counts gaps within 3 ms of
-- the median: when most are, the clients retry in lockstep (no jitter). $1 is the declared
-- policy's base delay in ms (0: none); within counts gaps in [base·2^(n−1), base·2^(n−1) +
-- base], the good policy's delay with jitter.
WITH g AS (
    SELECT attempt, gap_ms FROM {{.Part "gaps"}} WHERE {{.Within}}
),
m AS (
    SELECT attempt, median(gap_ms) AS med FROM g GROUP BY attempt
)
SELECT
    attempt,
    count(*)                                   AS n,
    quantile_cont(gap_ms, 0.1)                 AS p10,
    quantile_cont(gap_ms, 0.5)                 AS p50,
    quantile_cont(gap_ms, 0.9)                 AS p90,
    count(*) FILTER (abs(gap_ms - m.med) <= 3) AS near_median,
    count(*) FILTER ($1 > 0 AND gap_ms >= $1 * pow(2, attempt - 1) AND gap_ms <= $1 * pow(2, attempt - 1) + $1) AS within
FROM g JOIN m USING (attempt)
GROUP BY attempt
ORDER BY attempt
