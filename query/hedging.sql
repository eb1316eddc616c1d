-- Hedged requests (docs/metrics.md, "Overlapping attempts"), over the attempts table:
-- the requests with an attempt sent while another was in flight, those attempts (hedges),
-- the hedges that won (the request's first 2xx), the attempts the client cancelled
-- because another won, and the hedge delay in ms: from the previous attempt's start to
-- the hedge's.
WITH h AS (
    SELECT lkey, hedge, won, cancelled,
        CASE WHEN hedge THEN (epoch_us(started) - epoch_us(prev_started)) / 1000.0 END AS delay_ms
    FROM {{.Table}}_attempts
    WHERE hedge OR cancelled -- what every figure below counts
)
SELECT
    count(DISTINCT lkey) FILTER (hedge)   AS requests,
    count(*) FILTER (hedge)               AS hedges,
    count(*) FILTER (hedge AND won)       AS wins,
    count(*) FILTER (cancelled)           AS cancelled,
    quantile_cont(delay_ms, 0.1)          AS p10,
    quantile_cont(delay_ms, 0.5)          AS p50,
    quantile_cont(delay_ms, 0.9)          AS p90
FROM h
