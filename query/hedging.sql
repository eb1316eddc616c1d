-- Hedged requests (docs/metrics.md, "Overlapping attempts"): the merge of the partials per
-- minute of first attempt (hedging_partial): the requests with an attempt sent while
-- another was in flight, those attempts (hedges), the hedges that won (the request's first
-- 2xx), the attempts the client cancelled because another won, and the hedge delay in ms,
-- from the previous attempt's start to the hedge's, over every minute's delays.
WITH d AS (
    SELECT quantile_cont(delay_ms, 0.1) AS p10, quantile_cont(delay_ms, 0.5) AS p50, quantile_cont(delay_ms, 0.9) AS p90
    FROM (SELECT unnest(delays) AS delay_ms FROM {{.Part "hedging"}} WHERE {{.Within}})
)
SELECT
    coalesce(sum(requests), 0)::BIGINT  AS requests,
    coalesce(sum(hedges), 0)::BIGINT    AS hedges,
    coalesce(sum(wins), 0)::BIGINT      AS wins,
    coalesce(sum(cancelled), 0)::BIGINT AS cancelled,
    any_value(d.p10), any_value(d.p50), any_value(d.p90)
FROM {{.Part "hedging"}}, d
WHERE {{.Within}}

{{define "hedging_partial"}}
WITH h AS (
    SELECT {{minute "first_ts"}} AS minute, lkey, hedge, won, cancelled,
        -- a hedge the log places before the attempt it followed (a clock coarser than
        -- the delay: a gateway's second) was sent with no delay, as a gap under 0 counts
        CASE WHEN hedge THEN greatest(epoch_us(started) - epoch_us(prev_started), 0) / 1000.0 END AS delay_ms
    FROM {{.Table}}_attempts
    WHERE (hedge OR cancelled) AND {{.Touched}} -- what every figure counts
)
SELECT minute,
    count(DISTINCT lkey) FILTER (hedge) AS requests,
    count(*) FILTER (hedge)             AS hedges,
    count(*) FILTER (hedge AND won)     AS wins,
    count(*) FILTER (cancelled)         AS cancelled,
    coalesce(list(delay_ms ORDER BY delay_ms) FILTER (hedge), []) AS delays
FROM h
GROUP BY minute
ORDER BY minute
{{end}}
