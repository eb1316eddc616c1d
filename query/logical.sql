-- Logical-request metrics, grouped by {{.Key}} over the logical table (prepare.sql), which
-- counts each logical request of _attempts by its first attempt's bucket and columns.
-- recovered: the first attempt was not 2xx and a later one was; exhausted: retried and
-- never 2xx; effective_success: 2xx share of final attempts.
--
-- Every strong-keyed request not in _attempts is a single first attempt: metrics.sql counts
-- strong first attempts over all rows, and Go takes out those of requests in _attempts
-- (the firsts table: multi_firsts) to get effective_success.
WITH lg AS (
    SELECT {{.Key}} AS k, sum(recovered) AS recovered, sum(exhausted) AS exhausted,
        sum(logical) AS logical, sum(final_ok) AS final_ok, sum(denied) AS denied
    FROM {{.Logical}}
    GROUP BY k
),
mf AS (
    SELECT {{.Key}} AS k, sum(firsts) AS firsts, sum(firsts_ok) AS firsts_ok, sum(firsts_denied) AS firsts_denied
    FROM {{.Firsts}}
    GROUP BY k
)
SELECT
    k,
    coalesce(lg.recovered, 0)::BIGINT AS recovered,
    coalesce(lg.exhausted, 0)::BIGINT AS exhausted,
    coalesce(lg.logical, 0)::BIGINT   AS logical,
    coalesce(lg.final_ok, 0)::BIGINT  AS final_ok,
    coalesce(mf.firsts, 0)::BIGINT    AS multi_firsts,
    coalesce(mf.firsts_ok, 0)::BIGINT AS multi_firsts_ok,
    coalesce(lg.denied, 0)::BIGINT    AS denied,
    coalesce(mf.firsts_denied, 0)::BIGINT AS multi_firsts_denied
FROM lg FULL JOIN mf USING (k)
ORDER BY k
