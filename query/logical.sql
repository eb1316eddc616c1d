-- Logical-request metrics, grouped by {{.Key}} taken from each logical request's first
-- attempt. recovered: the first attempt was not 2xx and a later one was; exhausted:
-- retried and never 2xx; effective_success: 2xx share of final attempts.
--
-- Requests with retries are in {{.Table}}_multi. Every other strong-keyed request is a
-- single first attempt: metrics.sql counts strong first attempts over all rows, and Go
-- takes out those of requests in _multi (multi_firsts) to get effective_success.
{{- if .LCube}}
-- With the cache (query/cache.go): the same counts, added up from its cubes.
WITH lg AS (
    SELECT {{.Key}} AS k, sum(recovered) AS recovered, sum(exhausted) AS exhausted,
        sum(logical) AS logical, sum(final_ok) AS final_ok
    FROM {{.LCube}}_l
    GROUP BY k
),
mf AS (
    SELECT {{.Key}} AS k, sum(firsts) AS firsts, sum(firsts_ok) AS firsts_ok
    FROM {{.LCube}}_m
    GROUP BY k
)
{{- else}}
WITH l AS (
    SELECT lkey,
        -- first and final attempt, in attempt_order
        arg_min({{.Key}}, {{template "attempt_order"}}) AS k,
        min(attempt)                                         AS first_n,
        arg_min(status, {{template "attempt_order"}})   AS first_status,
        arg_max(status, {{template "attempt_order"}})   AS final_status,
        max(attempt)                                         AS last_n,
        coalesce(bool_or(status BETWEEN 200 AND 299), false) AS any_ok
    FROM {{.Table}}_multi
    GROUP BY lkey
),
lg AS (
    SELECT k, {{template "logical_counts"}}
    FROM l
    GROUP BY k
),
mf AS (
    SELECT {{.Key}} AS k, count(*) AS firsts, count(*) FILTER (status BETWEEN 200 AND 299) AS firsts_ok
    FROM {{.Table}}_multi
    WHERE attempt = 0 AND strong
    GROUP BY k
)
{{- end}}
SELECT
    k,
    coalesce(lg.recovered, 0)::BIGINT AS recovered,
    coalesce(lg.exhausted, 0)::BIGINT AS exhausted,
    coalesce(lg.logical, 0)::BIGINT   AS logical,
    coalesce(lg.final_ok, 0)::BIGINT  AS final_ok,
    coalesce(mf.firsts, 0)::BIGINT    AS multi_firsts,
    coalesce(mf.firsts_ok, 0)::BIGINT AS multi_firsts_ok
FROM lg FULL JOIN mf USING (k)
ORDER BY k

{{- /* The logical metrics over requests (first_n, first_status, final_status, last_n,
any_ok each): here and in the cache's cube (prepare.sql, prepare_lcube). */}}
{{define "logical_counts"}}
        count(*) FILTER (first_n = 0 AND NOT coalesce(first_status BETWEEN 200 AND 299, false) AND any_ok) AS recovered,
        count(*) FILTER (last_n >= 1 AND NOT any_ok)                                                      AS exhausted,
        count(*)                                                                                          AS logical,
        count(*) FILTER (final_status BETWEEN 200 AND 299)                                                AS final_ok
{{- end}}

{{- /* The order of a logical request's attempts: by attempt number, then time and place in
the logs (a request can log the same attempt number twice). The report and the cache
(prepare.sql) both pick first and final attempts by it. */}}
{{define "attempt_order"}}{'a': attempt, 't': ts, 'f': file_id, 'l': line}{{end}}
