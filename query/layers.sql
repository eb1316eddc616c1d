-- The layers' join (docs/metrics.md, "Layers"), over the Set's rows in its range: the
-- attempts read from traces (spans), those a gateway's line was matched to by the span
-- it logged (prepare_rows' _joined), and the gateway's lines that logged a span matched
-- to none (their client was not traced, or its spans were not loaded).
WITH r AS (
    SELECT span_hash, file_id IN (SELECT file_id FROM files WHERE format = 'otel') AS client
    FROM {{.Table}}_lines
    WHERE in_range
)
SELECT
    count(*) FILTER (client)                                                             AS spans,
    count(*) FILTER (client AND span_hash IN (SELECT span_hash FROM {{.Table}}_joined))  AS matched,
    count(*) FILTER (NOT client AND span_hash IS NOT NULL)                               AS unmatched_lines
FROM r
