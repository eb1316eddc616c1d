-- Logical-request metrics, grouped by {{.Key}} taken from each logical request's first
-- attempt. recovered: the first attempt was not 2xx and a later one was; exhausted:
-- retried and never 2xx; effective_success: 2xx share of final attempts.
WITH l AS (
    SELECT lkey,
        arg_min({{.Key}}, attempt)                          AS k,
        min(attempt)                                        AS first_n,
        arg_min(status, attempt)                            AS first_status,
        arg_max(status, attempt)                            AS final_status,
        max(attempt)                                        AS last_n,
        coalesce(bool_or(status BETWEEN 200 AND 299), false) AS any_ok
    FROM {{.Table}}
    WHERE attempt IS NOT NULL
    GROUP BY lkey
)
SELECT
    k,
    count(*) FILTER (first_n = 0 AND NOT coalesce(first_status BETWEEN 200 AND 299, false) AND any_ok) AS recovered,
    count(*) FILTER (last_n >= 1 AND NOT any_ok)                                                      AS exhausted,
    avg(CASE WHEN final_status BETWEEN 200 AND 299 THEN 1.0 ELSE 0.0 END)                             AS effective_success
FROM l
GROUP BY k
ORDER BY k
