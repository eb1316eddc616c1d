{{/*
Stage one of a report (docs/internals.md, "The count tables"): the statements that turn the
rows of a range into the count tables every figure is computed from. They run in this
order on the Set's connection; objects are named after {{.Table}}, chosen by the program.
The stored cache (query/cache.go) is the same tables built over every row.

  _p        the route and method to keep (NULL for all): the parameters a user types as text
  _lines    view: the lines of the range and of its context (the time around it that
            links its requests and sustains its alerts: {{.Before}} to {{.After}}), with
            their strong key (skey), start time and whether they are in the range itself
            (in_range). {{.Since}}, {{.Until}}, {{.Before}}, {{.After}}, {{.MaxGap}} and
            {{.Infer}} are SQL literals the program formats from parsed values (a time, a
            number, a boolean), so that DuckDB can skip row groups outside the range;
            {{.Where}}, when set, is a condition the cache's update writes, never text a
            user typed, and {{.From}} a table of requests' rows it made to read instead of
            requests
  _retried  the keys of tagged retries; _alias, _fix: the keys and attempt numbers the
            checks of keys change (below)
  _rows     view: the lines with those changes
  _chain    rows linked by the heuristic (tagged, no strong key) and, with infer, untagged
            rows with inferred attempt numbers
  (main)    view: every row of the range with its attempt number (logged or inferred),
            logical-request key (lkey) and what linked it

The count tables (the contract; their Go types are in query/contract.go):

  _time     rows counted per time bucket ({{.Grain}} s; {{.Suffix}} names a grain other than 60 s)
  _edges    the context's rows counted like _time, per minute: what alerts read around a range
            (empty when the range is every row)
  _groups   rows counted by minute and the columns of the --by groupings
  _attempts the rows of every logical request that has a retry (or was linked by the
            heuristic) and whose first attempt is in the range, with what the previous and
            first attempts got. Most requests have one attempt and no row here, which is
            what keeps a report over 10M rows fast.
  _logical  the logical requests of _attempts counted by their first attempt's bucket and columns
  _firsts   the strong first attempts of _attempts, by their own bucket and columns

Linking (docs/metrics.md): Idempotency-Key, then amz-sdk-invocation-id, then
X-Request-Id, taken as unique per business request; rows with none of them link by
client address, user agent, method and URI: retry n joins the most recent open chain no
other retry took, one whose attempt n-1 was not answered 2xx and ended at most max_gap
seconds before (hlink_level). Inference (--infer-attempts):
an untagged row repeats the previous row of the same client, user agent, method and URI
when that one got a retryable failure (query.RetryableFailure) and this one started at
most max_gap seconds after it ended; its attempt number counts the repeats.
*/}}
{{define "prepare_params"}}
CREATE TEMP TABLE {{.Table}}_p AS SELECT $1::VARCHAR AS route, $2::VARCHAR AS method
{{end}}

{{define "prepare_lines"}}
{{- if .Layers}}
-- Layers (docs/metrics.md): a gateway's line that logged the client span an attempt read
-- from traces was sent in (traceparent) is that attempt, seen again. It leaves the rows;
-- the span takes its upstream tries (the gateway's own retries of that attempt).
CREATE TEMP TABLE {{.Table}}_joined AS
SELECT file_id, line, span_hash, upstream_tries, upstream_status
FROM {{or .From "requests"}}
WHERE span_hash IN (SELECT span_hash FROM {{or .From "requests"}}
                    WHERE span_hash IS NOT NULL AND ts >= {{.Before}} AND ts < {{.After}}
                      AND file_id IN (SELECT file_id FROM files WHERE format = 'otel'))
  AND file_id NOT IN (SELECT file_id FROM files WHERE format = 'otel')
  AND ts >= {{.Before}} AND ts < {{.After}};
{{- end}}
CREATE TEMP VIEW {{.Table}}_lines AS
SELECT r.file_id, r.line, r.ts, r.remote_addr, r.user_agent, r.method, r.uri, r.route, r.host, r.upstream_addr,
       r.status, r.upstream_status, r.upstream_tries, r.retry_after, r.key_text,
       r.error_code, -- the upstream's error code where logged (x-amzn-ErrorType): throttles that are not 429
       r.operation,  -- the operation a POST names where logged (X-Amz-Target): reads that are POSTs
       r.max_attempts, -- the client's own cap, when its header states it (amz-sdk-request max=)
       r.span_hash,    -- the client span (Layers)
       -- the keys are their hashes (ingest/keys.go), here under the names of what they hash
       r.idempotency_key_hash AS idempotency_key, r.invocation_id_hash AS invocation_id, r.request_id_hash AS request_id,
       r.attempt AS logged_attempt,
       (r.idempotency_key_hash IS NOT NULL OR r.invocation_id_hash IS NOT NULL OR r.request_id_hash IS NOT NULL) AS has_skey,
       coalesce(r.idempotency_key_hash, r.invocation_id_hash, r.request_id_hash) AS skey,
       CASE WHEN r.idempotency_key_hash IS NOT NULL THEN 'idempotency_key'
            WHEN r.invocation_id_hash IS NOT NULL THEN 'invocation_id'
            WHEN r.request_id_hash IS NOT NULL THEN 'request_id' END AS skind,
       r.ts - to_microseconds(CAST(coalesce(r.request_time, 0) * 1000000 AS BIGINT)) AS started,
       r.ts >= {{.Since}} AND r.ts < {{.Until}} AS in_range
FROM {{if .Layers}}(
    SELECT r.* REPLACE (coalesce(r.upstream_tries, j.upstream_tries) AS upstream_tries,
                        coalesce(r.upstream_status, j.upstream_status) AS upstream_status)
    FROM {{or .From "requests"}} r
    ANTI JOIN {{.Table}}_joined x ON x.file_id = r.file_id AND x.line = r.line
    LEFT JOIN (SELECT span_hash, max(upstream_tries) AS upstream_tries, any_value(upstream_status) AS upstream_status
               FROM {{.Table}}_joined GROUP BY span_hash) j ON j.span_hash = r.span_hash
){{else}}{{or .From "requests"}}{{end}} r
WHERE r.ts >= {{.Before}} AND r.ts < {{.After}}
{{- if .HasRoute}}
  AND r.route = (SELECT route FROM {{.Table}}_p)
{{- end}}
{{- if .HasMethod}}
  AND r.method = (SELECT method FROM {{.Table}}_p)
{{- end}}
{{- if .Where}}
  AND ({{.Where}})
{{- end}};
{{end}}

{{- /* The keys that tagged retries carry, and the X-Request-Ids that take another key
(prepare_rows below); the parts' pass (prepare_parts) builds them over every row. */}}
{{define "prepare_keys"}}
-- Keys the client sent are checked before they link (docs/metrics.md, "Keys that lie"),
-- on the lines of the keys that tagged retries carry (_retried). _fix holds the lines
-- whose key or attempt number that changes, a few in a clean log:
--   keyed_first  a line without the attempt header whose key a tagged retry carries is
--                that request's first attempt, logged before the client started counting
--   aliased      a line whose only key is an X-Request-Id that other lines carry with one
--                Idempotency-Key or invocation id takes that key (a key sent only from the
--                second attempt on does not split the request)
--   reused_key   a key with two first attempts (attempt 0, or no header) is reused across
--                requests ("undefined", a constant): its lines link as if they had none,
--                unless the header is stuck (below)
--   renumbered   a key whose attempt numbers repeat (a header stuck at 1) is numbered by
--                place: its lowest number, then one more each line, in the order they
--                started (numbers that only come out of order are left: clocks and
--                hedged attempts do that). So is a key whose header is stuck at the first
--                number (x-stainless-retry-count at 0, x-envoy-attempt-count at 1): every
--                line of it is a first attempt, of one method and URI, and each follows a
--                retryable failure of the one before, sent after it ended and within
--                max_gap, as retries are; requests that reuse a key do not all fail so,
--                one after the other
-- Tables are views when the count tables are the stored cache's: only replays read the
-- rows then.
CREATE TEMP {{if .Cached}}VIEW{{else}}TABLE{{end}} {{.Table}}_retried AS
SELECT DISTINCT skey AS h FROM {{.Table}}_lines WHERE logged_attempt >= 1 AND has_skey
UNION
-- keys with two tagged first attempts: reused, or a header stuck at the first number
SELECT skey FROM {{.Table}}_lines WHERE logged_attempt = 0 AND has_skey GROUP BY skey HAVING count(*) >= 2;
CREATE TEMP {{if .Cached}}VIEW{{else}}TABLE{{end}} {{.Table}}_alias AS
SELECT request_id, any_value(skey) AS skey, any_value(skind) AS skind
FROM {{.Table}}_lines
WHERE request_id IS NOT NULL AND skind <> 'request_id' AND skey IN (SELECT h FROM {{.Table}}_retried)
GROUP BY request_id
HAVING count(DISTINCT skey) = 1;
{{end}}

{{define "prepare_rows"}}
{{- template "prepare_lines" .}}
{{- template "prepare_keys" .}}
{{- template "prepare_fix" .}}
{{end}}

{{define "prepare_fix"}}
CREATE TEMP {{if .Cached}}VIEW{{else}}TABLE{{end}} {{.Table}}_fix AS
WITH k AS MATERIALIZED (
    SELECT l.file_id, l.line, l.logged_attempt, l.started, l.ts, l.status, hash(l.method, l.uri) AS target,
        coalesce(a.skey, l.skey) AS skey, coalesce(a.skind, l.skind) AS skind, a.skey IS NOT NULL AS aliased
    FROM {{.Table}}_lines l
    LEFT JOIN {{.Table}}_alias a ON a.request_id = CASE WHEN l.skind = 'request_id' THEN l.request_id END
    WHERE l.has_skey AND (a.skey IS NOT NULL OR l.skey IN (SELECT h FROM {{.Table}}_retried))
),
-- the lines of each key, in the order they started, with whether each follows a
-- retryable failure of the one before as a retry does (stuck, above)
f0 AS (
    SELECT skey, logged_attempt, target,
        lag({{retryableFailure "status"}}) OVER w AS after_failure,
        epoch(started) - epoch(lag(ts) OVER w) AS gap
    FROM k
    WINDOW w AS (PARTITION BY skey ORDER BY started, ts, file_id, line)
),
stuck AS (
    SELECT skey AS h FROM f0
    GROUP BY skey
    HAVING count(*) >= 2 AND count(*) FILTER (logged_attempt >= 1) = 0 AND count(DISTINCT target) = 1
       AND bool_and(after_failure IS NULL OR (after_failure AND gap >= -1 AND gap <= {{.MaxGap}}))
),
-- per key: a reused key, or attempt numbers
-- that repeat. With fewer than two first attempts, the lines other than the first have
-- numbers of 1 and up, so a number repeats exactly when two lines log it.
g AS (
    SELECT skey AS h,
        count(*) FILTER (logged_attempt IS NULL OR logged_attempt = 0) >= 2 AND skey NOT IN (SELECT h FROM stuck) AS reused,
        count(logged_attempt) > count(DISTINCT logged_attempt) AS repeats
    FROM k
    GROUP BY h
),
kg AS (
    SELECT k.*, g.reused, NOT g.reused AND g.repeats AS renumber
    FROM k JOIN g ON g.h = k.skey
),
-- only the keys renumbered are sorted: by number, then time, a repeated number's lines in
-- the order they started
n AS (
    SELECT file_id, line, skey, skind, false AS reused_key,
        CAST(first_value(coalesce(logged_attempt, 0)) OVER byNumber + row_number() OVER byNumber - 1 AS INTEGER) AS attempt
    FROM kg
    WHERE renumber
    WINDOW byNumber AS (PARTITION BY skey ORDER BY coalesce(logged_attempt, 0), started, ts, file_id, line)
)
SELECT file_id, line, skey, skind, reused AS reused_key,
    CASE WHEN reused THEN logged_attempt ELSE coalesce(logged_attempt, 0) END AS attempt
FROM kg
WHERE NOT renumber AND (reused OR logged_attempt IS NULL OR aliased)
UNION ALL
SELECT * FROM n;
CREATE TEMP VIEW {{.Table}}_rows AS
SELECT l.* REPLACE (
        CASE WHEN f.line IS NULL THEN l.logged_attempt ELSE f.attempt END AS logged_attempt,
        CASE WHEN f.reused_key THEN NULL WHEN f.line IS NOT NULL THEN f.skey ELSE l.skey END AS skey,
        CASE WHEN f.reused_key THEN NULL WHEN f.line IS NOT NULL THEN f.skind ELSE l.skind END AS skind,
        l.has_skey AND NOT coalesce(f.reused_key, false) AS has_skey),
    coalesce(NOT f.reused_key AND l.logged_attempt IS NULL, false) AS keyed_first,
    coalesce(f.reused_key, false) AS reused_key,
    coalesce(l.logged_attempt IS NOT NULL AND f.attempt <> l.logged_attempt, false) AS renumbered
FROM {{.Table}}_lines l LEFT JOIN {{.Table}}_fix f ON f.file_id = l.file_id AND f.line = l.line;
-- The loads of logs timed to the second (the slack, below): those of a path none of whose
-- loads starts or ends off a whole second. Not one line alone: a log timed to the
-- millisecond puts one line in a thousand on a whole second, and nginx logs the lines of
-- one event loop pass at one millisecond. Rows without a load in the registry (a
-- cluster's, read into a working database) by their own load's rows in the context.
{{- if .Coarse}}
CREATE TEMP VIEW {{.Table}}_coarse AS SELECT file_id FROM {{.Coarse}}
{{- else}}
CREATE TEMP {{if .Cached}}VIEW{{else}}TABLE{{end}} {{.Table}}_coarse AS
{{template "coarse_loads" .}}
{{- end}}
{{end}}

{{define "coarse_loads"}}
SELECT file_id FROM files
WHERE path NOT IN (SELECT path FROM files
                   WHERE epoch_us(first_ts) % 1000000 <> 0 OR epoch_us(last_ts) % 1000000 <> 0)
UNION ALL
SELECT file_id FROM {{.Table}}_lines
WHERE file_id NOT IN (SELECT file_id FROM files)
GROUP BY file_id
HAVING bool_and(epoch_us(ts) % 1000000 = 0)
{{end}}

{{- /* Linking in parts (query/parts.go): every row of the Set is given a part, from
its link key alone, so that each part links on its own to what linking all at once gives.
A row's link key is its strong key, or the key its X-Request-Id takes (_alias), else
what the heuristic links it by (hk). Part 0 takes what could link across keys: the keys
that may be reused (two first attempts: their lines then link by client, user agent,
method and URI, hence with the heuristic's lines of those, which join them there) and
the keys that carry an X-Request-Id beside another retried key (no alias then, which
only the two together can tell). The rest go to 1 + a hash of the key modulo
{{.Parts}}: _part holds each row's (prepare_part reads a part's rows by it). */}}
{{define "prepare_parts"}}
CREATE TEMP TABLE {{.Table}}_coarse AS
{{template "coarse_loads" .}};
CREATE TEMP TABLE {{.Table}}_part AS
WITH e AS (
    SELECT l.file_id, l.line, l.logged_attempt, l.has_skey, l.skind, l.request_id, l.skey,
        coalesce(a.skey, l.skey) AS lk, hash(l.remote_addr, l.user_agent, l.method, l.uri) AS hk
    FROM {{.Table}}_lines l
    LEFT JOIN {{.Table}}_alias a ON a.request_id = CASE WHEN l.skind = 'request_id' THEN l.request_id END
),
shared AS (
    SELECT request_id FROM e
    WHERE request_id IS NOT NULL AND skind <> 'request_id' AND skey IN (SELECT h FROM {{.Table}}_retried)
    GROUP BY request_id HAVING count(DISTINCT skey) > 1
),
odd AS (
    SELECT lk AS h FROM e WHERE has_skey AND coalesce(logged_attempt, 0) = 0 GROUP BY lk HAVING count(*) >= 2
    UNION
    SELECT skey FROM e WHERE skind <> 'request_id' AND request_id IN (SELECT request_id FROM shared)
),
oddhk AS (SELECT DISTINCT hk FROM e WHERE lk IN (SELECT h FROM odd))
SELECT file_id, line,
    CASE WHEN has_skey AND lk IN (SELECT h FROM odd) THEN 0
         WHEN has_skey THEN 1 + hash(lk) % {{.Parts}}
         WHEN hk IN (SELECT hk FROM oddhk) THEN 0
         ELSE 1 + hash(hk) % {{.Parts}} END AS part
FROM e;
DROP TABLE {{.Table}}_alias;
DROP TABLE {{.Table}}_retried
{{end}}

{{define "prepare_part"}}
CREATE TEMP TABLE {{.Table}}_src AS
SELECT r.* FROM {{or .From "requests"}} r
SEMI JOIN (SELECT file_id, line FROM {{.Whole}}_part WHERE part = {{.Part}}) p ON p.file_id = r.file_id AND p.line = r.line
{{end}}

{{define "prepare_hrows"}}
-- The rows the heuristic links: tagged, without a strong key, by the client, user agent,
-- method and URI they link by (hk).
CREATE TEMP TABLE {{.Table}}_hrows AS
WITH h AS (
    SELECT file_id, line, hash(remote_addr, user_agent, method, uri) AS hk, logged_attempt AS attempt, ts, started, status
    FROM {{.Table}}_rows
    WHERE logged_attempt IS NOT NULL AND NOT has_skey
)
SELECT *, {{template "coarse" .}}
FROM h
{{end}}

{{define "prepare_hlink"}}
-- First attempts start chains, named after their place in the logs.
CREATE TEMP TABLE {{.Table}}_hlink AS
SELECT file_id, line, hk, attempt, ts, status, file_id || ':' || line AS chain, false AS after_2xx
FROM {{.Table}}_hrows
WHERE attempt = 0
{{end}}

{{define "hlink_level"}}
-- Retry {{.Level}} joins the most recent open chain of its client, method and URI: one
-- whose attempt {{.Level}} - 1 was not answered 2xx, ended before this one started and
-- that no other retry {{.Level}} took; and it must have ended at most max_gap before this
-- one started. "Before" within the log's clock resolution (slack): a line timed to the
-- second may show its retry starting up to a second before the attempt it follows ended.
-- That is a stack per client, method and URI (hstack), which decides which chains are
-- taken; the retries then take them in order (hstack's pairing). A retry with no such chain then
-- joins, the same way, a chain whose attempt {{.Level}} - 1 was answered 2xx (after_2xx): a
-- timeout race, the gateway logging an answer the client had already given up on. One with
-- neither is an orphan: it starts a chain of its own (so does every attempt past the last
-- level the program runs).
CREATE TEMP TABLE {{.Table}}_hpush AS
SELECT hk, ts, chain FROM {{.Table}}_hlink
WHERE attempt = {{.Level}} - 1 AND NOT coalesce(status BETWEEN 200 AND 299, false);
CREATE TEMP TABLE {{.Table}}_hpop AS
SELECT file_id, line, hk, attempt, ts, started, status, coarse
FROM {{.Table}}_hrows WHERE attempt {{if .Last}}>={{else}}={{end}} {{.Level}};
{{template "hstack" .}}
INSERT INTO {{.Table}}_hlink
SELECT p.file_id, p.line, p.hk, p.attempt, p.ts, p.status, coalesce(m.chain, p.file_id || ':' || p.line), false
FROM {{.Table}}_hpop p LEFT JOIN {{.Table}}_hmatch m USING (file_id, line);
CREATE OR REPLACE TEMP TABLE {{.Table}}_hpush AS
SELECT hk, ts, chain FROM {{.Table}}_hlink
WHERE attempt = {{.Level}} - 1 AND coalesce(status BETWEEN 200 AND 299, false);
CREATE OR REPLACE TEMP TABLE {{.Table}}_hpop AS
SELECT * FROM {{.Table}}_hpop p ANTI JOIN {{.Table}}_hmatch m USING (file_id, line);
{{template "hstack" .}}
UPDATE {{.Table}}_hlink l SET chain = m.chain, after_2xx = true
FROM {{.Table}}_hmatch m WHERE l.file_id = m.file_id AND l.line = m.line;
DROP TABLE {{.Table}}_hmatch;
DROP TABLE {{.Table}}_hpop;
DROP TABLE {{.Table}}_hpush;
{{end}}

{{- /* The heuristic's stack, per client, method and URI: the chains of _hpush push when
they end, the retries of _hpop pop the top when they start (+ slack); _hmatch holds the
retries that popped a chain ended at most max_gap before they started. In one statement:
in time order (chains before retries at the same moment), the stack's depth after each
event is the running sum of +1 (chain) and -1 (retry) clamped at 0, which is the sum less
the lowest sum so far when that is below 0. A chain lies at the depth after it; a retry
pops the depth before it, i.e. the latest chain before it at that depth (ASOF). */}}
{{define "hstack"}}
CREATE OR REPLACE TEMP TABLE {{.Table}}_hevents AS
WITH e AS (
    SELECT hk, ts, ts AS moment, 0 AS kind, chain, 1 AS x FROM {{.Table}}_hpush
    UNION ALL BY NAME
    SELECT file_id, line, hk, ts, started, started + {{template "slack"}} AS moment, 1 AS kind, -1 AS x
    FROM {{.Table}}_hpop
),
s AS (
    SELECT *, sum(x) OVER byTime AS total FROM e
    WINDOW byTime AS (PARTITION BY hk ORDER BY moment, kind, chain, file_id, line ROWS UNBOUNDED PRECEDING)
),
d AS (
    SELECT *, total - least(0, min(total) OVER byTime) AS depth FROM s
    WINDOW byTime AS (PARTITION BY hk ORDER BY moment, kind, chain, file_id, line ROWS UNBOUNDED PRECEDING)
)
SELECT *, CASE WHEN kind = 0 THEN depth
               ELSE coalesce(lag(depth) OVER (PARTITION BY hk ORDER BY moment, kind, chain, file_id, line), 0) END AS level
FROM d;
CREATE OR REPLACE TEMP TABLE {{.Table}}_hmatch AS
WITH m AS (
    SELECT r.file_id, r.line, r.hk, r.moment, c.chain, c.ts AS ended
    FROM (SELECT * FROM {{.Table}}_hevents WHERE kind = 1) r
    ASOF JOIN (SELECT hk, level, moment, ts, chain FROM {{.Table}}_hevents WHERE kind = 0) c
        ON r.hk = c.hk AND r.level = c.level AND r.moment >= c.moment
    WHERE r.level > 0 AND epoch(r.started) - epoch(c.ts) <= {{.MaxGap}}
),
-- The stack decides which chains are taken: a failure nobody retried (a 404, a call that
-- gave up) stays at its bottom. Who takes which is first in, first out: the k-th retry to
-- start takes the k-th taken chain to end, so that concurrent calls that failed one after
-- the other and waited alike are not swapped (the stack alone gave a retry the chain that
-- failed last). Still valid: the k-th chain ended before the k-th retry started and at
-- most max_gap before, since the stack's pairs were.
rk AS (SELECT file_id, line, hk, row_number() OVER (PARTITION BY hk ORDER BY moment, file_id, line) AS k FROM m),
ck AS (SELECT hk, chain, row_number() OVER (PARTITION BY hk ORDER BY ended, chain) AS k FROM m)
SELECT rk.file_id, rk.line, ck.chain FROM rk JOIN ck USING (hk, k);
DROP TABLE {{.Table}}_hevents;
{{end}}

{{define "prepare_chain"}}
CREATE {{.Kind}} {{.Table}}_chain AS
WITH hc AS (
    SELECT r.*, r.logged_attempt AS attempt, false AS inferred, 'heuristic' AS linked_by, l.chain, l.after_2xx
    FROM {{.Table}}_rows r JOIN {{.Table}}_hlink l USING (file_id, line)
),
u AS (
    SELECT *,
        CASE WHEN lag(ts) OVER hk IS NULL
               OR epoch(started) - epoch(lag(ts) OVER hk) > {{.MaxGap}}
               OR NOT coalesce({{retryableFailure "lag(status) OVER hk"}}, false)
             THEN 1 ELSE 0 END AS new_chain
    FROM {{.Table}}_rows
    WHERE logged_attempt IS NULL AND {{.Infer}}
    WINDOW hk AS (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, line)
),
uc AS (
    SELECT * EXCLUDE (new_chain),
        CAST(sum(new_chain) OVER (PARTITION BY remote_addr, user_agent, method, uri ORDER BY ts, line
                                  ROWS UNBOUNDED PRECEDING) AS VARCHAR) AS chain
    FROM u
),
ui AS (
    SELECT *,
        CAST(row_number() OVER (PARTITION BY remote_addr, user_agent, method, uri, chain ORDER BY ts, line) - 1 AS INTEGER) AS attempt,
        true AS inferred, 'inferred' AS linked_by, false AS after_2xx
    FROM uc
)
SELECT * EXCLUDE (chain, skey, skind, logged_attempt, has_skey, keyed_first),
    false AS strong,
    'h:' || hash(remote_addr, user_agent, method, uri) || ':' || chain AS lkey
FROM (SELECT * FROM hc UNION ALL BY NAME SELECT * FROM ui){{if .Sorted}}
ORDER BY ts{{end}}
{{end}}

{{define "prepare_all"}}
CREATE TEMP VIEW {{.Table}} AS
SELECT * EXCLUDE (logged_attempt, skey, skind, has_skey, keyed_first),
    logged_attempt AS attempt, keyed_first AS inferred,
    logged_attempt IS NOT NULL AS strong, -- linked by a key the client sent
    CASE WHEN logged_attempt IS NOT NULL THEN CAST(skey AS VARCHAR) END AS lkey,
    CASE WHEN logged_attempt IS NOT NULL THEN skind END AS linked_by
FROM {{.Table}}_rows
WHERE (logged_attempt IS NOT NULL AND has_skey)
   OR (logged_attempt IS NULL AND NOT {{.Infer}})
UNION ALL BY NAME
SELECT * FROM {{.Table}}_chain
{{end}}

{{- /* What the row count tables count of their rows (rowCounts: query/counts.go, which
writes them for both engines); the cache's update adds these up. */}}
{{define "prepare_time"}}
-- The time table: the rows counted per {{.Grain}} s bucket, by the columns the row metrics read
-- (not the groupings': 100K routes would make it as large as the rows). Per minute it is the
-- groups table summed over the groupings (built first), which is read instead of every row.
CREATE {{.Kind}} {{.Table}}_time{{.Suffix}} AS
{{- if .Suffix}}
{{template "time_counts" .}}
WHERE in_range
GROUP BY ALL;
{{- else}}
SELECT ts, status, attempt, inferred, strong, linked_by, cancelled,
       {{rowSums}}
FROM {{.Table}}_groups
GROUP BY ALL{{if .Sorted}} ORDER BY ts{{end}};
-- The edges table: the same counts of the context, for alerts that cross the range's bounds
-- (none when the context is the range: no pass over the rows then).
CREATE {{.Kind}} {{.Table}}_edges AS
{{template "time_counts" .}}
WHERE {{if and (eq .Before .Since) (eq .After .Until)}}false{{else}}NOT in_range{{end}}
GROUP BY ALL{{if .Sorted}} ORDER BY ts{{end}}
{{- end}}
{{end}}

{{define "time_counts"}}
SELECT time_bucket(to_seconds({{.Grain}}), ts, TIMESTAMP '1970-01-01') AS ts,
       status, attempt, inferred, strong, linked_by, cancelled,
       {{rowCounts}}
FROM {{template "flagged_rows" .}}
{{end}}

{{- /* Every row with whether it was cancelled (prepare_multi, or the cache's attempts):
the few cancelled rows joined to every row by their place in the logs. */}}
{{define "flagged_rows"}}(
    SELECT r.*, c.line IS NOT NULL AS cancelled
    FROM {{.Table}} r
    LEFT JOIN {{.Table}}_cancelled c ON c.file_id = r.file_id AND c.line = r.line
){{end}}

{{define "prepare_groups"}}
-- The groups table: the rows counted by minute and the columns of every --by grouping, for
-- the groups' figures and the alerts on each group's own minutes.
CREATE {{.Kind}} {{.Table}}_groups AS
SELECT time_bucket(to_seconds(60), ts, TIMESTAMP '1970-01-01') AS ts,
       method, route, host, upstream_addr, status, attempt, inferred, strong, linked_by, cancelled,
       {{rowCounts}}
FROM {{template "flagged_rows" .}}
WHERE in_range
GROUP BY ALL{{if .Sorted}} ORDER BY ts{{end}}
{{end}}

{{define "prepare_logical"}}
-- The logical table: the logical requests of _attempts, counted by their first attempt's
-- time bucket and columns (a logical request belongs where its first attempt is).
CREATE {{.Kind}} {{.Table}}_logical{{.Suffix}} AS
WITH l AS (
    -- the first attempt in attempt_order, kept as its place in the logs and joined back
    -- (keeping its columns per request ran out of memory at 128 MB on 833K requests); the
    -- outcome is the first 2xx by end time, else the last answered attempt: final_ok when
    -- any attempt got a 2xx, hedged or not
    SELECT lkey,
        min({{template "attempt_order"}})               AS first,
        max(attempt)                                    AS last_n,
        coalesce(bool_or(status BETWEEN 200 AND 299), false) AS any_ok,
        -- the last attempt, for a request that stopped below its client's cap
        arg_max({'max_attempts': max_attempts, 'attempt': attempt, 'status': status, 'error_code': error_code},
                {{template "attempt_order"}})           AS last
    FROM {{.Table}}_attempts
    GROUP BY lkey
),
f AS (
    SELECT time_bucket(to_seconds({{.Grain}}), m.ts, TIMESTAMP '1970-01-01') AS ts, m.method, m.route, m.host,
        m.upstream_addr, m.status, m.attempt, m.status AS first_status, m.attempt AS first_n,
        l.last_n, l.any_ok, l.last
    FROM l JOIN {{.Table}}_attempts m ON m.file_id = l.first.f AND m.line = l.first.l
)
SELECT ts, method, route, host, upstream_addr, status, attempt,
    count(*) FILTER (first_n = 0 AND NOT coalesce(first_status BETWEEN 200 AND 299, false) AND any_ok) AS recovered,
    count(*) FILTER (last_n >= 1 AND NOT any_ok)                                                      AS exhausted,
    count(*)                                                                                          AS logical,
    count(*) FILTER (any_ok)                                                                          AS final_ok,
    count(*) FILTER (last_n >= 1 AND NOT any_ok AND {{belowCap "last."}})                              AS denied
FROM f
GROUP BY ALL{{if .Sorted}} ORDER BY ts{{end}}
{{end}}

{{define "prepare_firsts"}}
-- The firsts table: the strong-keyed first attempts of _attempts, counted by their own time
-- bucket and columns. The time table counts every strong first attempt; the difference is
-- the logical requests that never retried (one attempt each).
CREATE {{.Kind}} {{.Table}}_firsts{{.Suffix}} AS
SELECT time_bucket(to_seconds({{.Grain}}), ts, TIMESTAMP '1970-01-01') AS ts,
    method, route, host, upstream_addr, status, attempt,
    count(*) AS firsts, count(*) FILTER (status BETWEEN 200 AND 299) AS firsts_ok,
    count(*) FILTER ({{belowCap ""}}) AS firsts_denied
FROM {{.Table}}_attempts
WHERE attempt = 0 AND strong AND ts >= {{.Since}} AND ts < {{.Until}} -- as the time table counts them
GROUP BY ALL{{if .Sorted}} ORDER BY ts{{end}}
{{end}}

{{- /* How findings name a logical request, from a row of the attempts table: its key as
logged, with what and when (a first attempt stores no key text, but findings name requests
by their retries). Computed where findings read it, not stored: the widest column of the
widest table. */}}
{{define "example"}}coalesce(key_text || ' (', '') ||
        coalesce(method, '-') || ' ' || coalesce(route, uri, '-') || ' at ' || strftime(ts, '%Y-%m-%dT%H:%M:%SZ') ||
        CASE WHEN key_text IS NOT NULL THEN ')' ELSE '' END{{end}}

{{- /* The order of a logical request's attempts: by attempt number, then time and place in
the logs (a request can log the same attempt number twice). */}}
{{define "attempt_order"}}{'a': attempt, 't': ts, 'f': file_id, 'l': line}{{end}}

{{- /* How far apart two times must be for the log to tell their order: a line timed to the
second ($time_local without $msec) can be up to a second off; one timed to the
millisecond a millisecond (its start is its end less its request time, each truncated:
nginx takes both from one clock, so a retry never starts before the attempt it follows
ended; two apart by 2 ms overlapped). Rows carry coarse, below. */}}
{{define "slack"}}CASE WHEN coarse THEN INTERVAL 1 SECOND ELSE INTERVAL 1 MILLISECOND END{{end}}

{{- /* Whether a row is timed to the second: its load is (prepare_rows' _coarse). */}}
{{define "coarse"}}file_id IN (SELECT file_id FROM {{.Table}}_coarse) AS coarse{{end}}

{{- /* The rows of every logical request that has a retry (or was linked by the heuristic
or inference), over the whole context, with the columns the logical metrics, loops,
findings and backoff read. */}}
{{define "multi_rows"}}
    SELECT file_id, line, ts, started, in_range, method, uri, route, host, upstream_addr, status, upstream_status,
        idempotency_key, invocation_id, request_id, retry_after, key_text, max_attempts, error_code, operation,
        logged_attempt AS attempt, keyed_first AS inferred, true AS strong, CAST(skey AS VARCHAR) AS lkey, skind AS linked_by,
        reused_key, renumbered, false AS after_2xx
    FROM {{.Table}}_rows
    WHERE logged_attempt IS NOT NULL AND has_skey AND skey IN (SELECT h FROM {{.Table}}_retried)
    UNION ALL BY NAME
    SELECT file_id, line, ts, started, in_range, method, uri, route, host, upstream_addr, status, upstream_status,
        idempotency_key, invocation_id, request_id, retry_after, key_text, max_attempts, error_code, operation,
        attempt, inferred, strong, lkey, linked_by, reused_key, renumbered, after_2xx
    FROM {{.Table}}_chain
{{end}}

{{define "prepare_multi"}}
-- For each of multi_rows, over the whole context: what the attempts before it got, its
-- request's first attempt, and how the attempts overlap (docs/metrics.md, "Overlapping attempts"):
--   hedge      it was sent while an earlier attempt of its request was still in flight,
--              as far as the log can tell (below): a hedged or parallel attempt, not one
--              sent after the previous one failed
--   won        it is the request's outcome: its first attempt answered 2xx, by end time
--   cancelled  the client abandoned it (499, 0) because another attempt won: that one
--              answered 2xx while this one was in flight, and it or the winner is a
--              hedge. Wasted work, not a failure
-- The row count tables read cancelled (a retry the client cancelled is left out of
-- retry success), the attempts table the rest.
CREATE TEMP TABLE {{.Table}}_multi AS
WITH m AS (
    -- only the columns the windows read: the attempts table joins the rest back (a wide
    -- copy of every retried request's rows cost a fifth of the cache's build)
    SELECT file_id, line, lkey, attempt, ts, started, status, retry_after, error_code, upstream_status, in_range
    FROM ({{template "multi_rows" .}})
),
nw AS (
    SELECT file_id, line, lkey, attempt, ts, started, status, {{template "coarse" .}},
        lag({'status': status, 'ts': ts, 'started': started, 'retry_after': retry_after, 'error_code': error_code}) OVER w AS prev,
        first_value({'status': status, 'upstream_status': upstream_status, 'attempt': attempt, 'ts': ts, 'in_range': in_range}) OVER w AS first,
        -- when the attempts before this one that were answered had all ended, and those
        -- the client abandoned (the gateway logs an abandoned attempt when it notices, which
        -- can be well after the client gave up and retried)
        max(ts) FILTER (NOT coalesce(status IN (0, 499), false))
            OVER (PARTITION BY lkey ORDER BY attempt, ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS answered_until,
        max(ts) FILTER (status IN (0, 499))
            OVER (PARTITION BY lkey ORDER BY attempt, ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS abandoned_until,
        -- when the first of them answered 2xx
        min(ts) FILTER (status BETWEEN 200 AND 299)
            OVER (PARTITION BY lkey ORDER BY attempt, ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ok_before,
        -- the request's first 2xx by end time
        min({'t': ts, 'f': file_id, 'l': line}) FILTER (status BETWEEN 200 AND 299) OVER (PARTITION BY lkey) AS ok
    FROM m
    WINDOW w AS (PARTITION BY lkey ORDER BY attempt, ts)
),
f AS (
    SELECT file_id, line, lkey, attempt, ts, prev, first, coarse,
        -- a hedge where the log can tell, beyond the slack (which heuristic linking allows
        -- too): it started before an answered one ended, or ended before (a retry sent after
        -- them ends after them); or, in a log timed finer than the second, one the client
        -- abandoned was logged no earlier than the slack before this one ended: dropped when
        -- this one answered (a retry after a timeout that the gateway noticed late, after the
        -- retry had ended, reads the same; to the second, any retry within the second would);
        -- or, finer than the second, it was abandoned as an earlier attempt's 2xx answered,
        -- having started no later: within the slack of both (no client retries after a 2xx)
        coalesce(started < answered_until - {{template "slack"}} OR ts < answered_until - {{template "slack"}}
                 OR (NOT coarse AND abandoned_until >= ts - {{template "slack"}})
                 OR (NOT coarse AND status IN (0, 499)
                     AND started <= ok_before + {{template "slack"}} AND ts <= ok_before + {{template "slack"}}), false) AS hedge,
        coalesce(ok = {'t': ts, 'f': file_id, 'l': line}, false) AS won,
        -- abandoned while a 2xx of its request was answered (started before it, within the slack)
        coalesce(status IN (0, 499) AND ok.t <= ts + {{template "slack"}} AND started < ok.t + {{template "slack"}}, false) AS lost
    FROM nw
),
-- Two attempts both lost were both in flight when the winner answered: the later one was
-- sent while the earlier was in flight, a hedge, however far apart the gateway logged
-- their cancelling (finer than the second). Cancelled: lost, and it or the winner a hedge
-- (a gateway can log an abandoned attempt after the client's retry, sent once it gave up,
-- has won). On the narrow rows, as nw.
fh AS (
    SELECT file_id, line, lkey, prev, first, won, lost,
        hedge OR coalesce(lost AND NOT coarse AND bool_or(lost)
            OVER (PARTITION BY lkey ORDER BY attempt, ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS hedge
    FROM f
)
SELECT file_id, line, prev, first, hedge, won,
    lost AND (hedge OR bool_or(won AND hedge) OVER (PARTITION BY lkey)) AS cancelled
FROM fh;
CREATE TEMP VIEW {{.Table}}_cancelled AS SELECT file_id, line FROM {{.Table}}_multi WHERE cancelled
{{end}}

{{define "prepare_attempts"}}
-- The window sorts only the columns it needs (prepare_multi: it carries every column it is
-- given through its sort); the rest joins back here by (file_id, line), unique per row.
CREATE {{if .Sorted}}TEMP TABLE{{else}}{{.Kind}}{{end}} {{.Table}}_attempts AS
WITH w AS (
    SELECT * FROM ({{template "multi_rows" .}}) m JOIN {{.Table}}_multi USING (file_id, line)
)
SELECT * EXCLUDE (prev, first, in_range),
    prev.status      AS prev_status,
    prev.ts          AS prev_end,
    prev.started     AS prev_started,
    prev.retry_after AS prev_retry_after,
    prev.error_code  AS prev_error_code,
    -- Retry-After is seconds or an HTTP-date in any of the three forms HTTP allows (RFC 9110
    -- 5.6.7: IMF-fixdate, RFC 850, asctime with its space-padded day); NULL when unparsable.
    coalesce(TRY_CAST(prev.retry_after AS DOUBLE),
             epoch(try_strptime(regexp_replace(prev.retry_after, ' +', ' ', 'g'),
                   ['%a, %d %b %Y %H:%M:%S GMT', '%A, %d-%b-%y %H:%M:%S GMT', '%a %b %d %H:%M:%S %Y'])) - epoch(prev.ts)) AS prev_retry_secs,
    first.status          AS first_status,
    first.upstream_status AS first_upstream_status,
    first.attempt         AS first_n,
    first.ts              AS first_ts -- the request's place in time: ranges cut the stored table by it
FROM w
WHERE first.in_range -- a logical request belongs to the range of its first attempt
{{end}}

{{- /* A Set that reads the stored cache: its tables are the cache's, cut to the range when
{{.Bounded}} (whole minutes, so that the cache's minute buckets cut exactly; the program
checks). A range of the cache is its window of the report over every row, which is what a
range's own linking with its context computes (docs/internals.md, "Ranges"); from the
cache it costs a filter, not a link. The chain view comes first: prepare_all reads it. */}}
{{define "cached_chain"}}
CREATE TEMP VIEW {{.Table}}_chain AS
{{- if .Bounded}}
SELECT * REPLACE (ts >= {{.Since}} AND ts < {{.Until}} AS in_range) FROM cache_chain
WHERE ts >= {{.Before}} AND ts < {{.After}}
{{- else}}
SELECT * FROM cache_chain
{{- end}}
{{end}}

{{define "cached_tables"}}
-- the rows cancelled, for the time table at a finer grain (flagged_rows)
CREATE TEMP VIEW {{.Table}}_cancelled AS SELECT file_id, line FROM cache_attempts WHERE cancelled;
{{- if .Bounded}}
-- the requests whose first attempt is in the range, with all their attempts: a table, as
-- every stage-two statement reads it
CREATE TEMP TABLE {{.Table}}_attempts AS
SELECT * FROM cache_attempts WHERE first_ts >= {{.Since}} AND first_ts < {{.Until}};
CREATE TEMP VIEW {{.Table}}_time AS SELECT * FROM cache_time WHERE ts >= {{.Since}} AND ts < {{.Until}};
CREATE TEMP VIEW {{.Table}}_edges AS
SELECT * FROM cache_time WHERE ts >= {{.Before}} AND ts < {{.After}} AND NOT (ts >= {{.Since}} AND ts < {{.Until}});
CREATE TEMP VIEW {{.Table}}_groups AS SELECT * FROM cache_groups WHERE ts >= {{.Since}} AND ts < {{.Until}};
CREATE TEMP VIEW {{.Table}}_logical AS SELECT * FROM cache_logical WHERE ts >= {{.Since}} AND ts < {{.Until}};
CREATE TEMP VIEW {{.Table}}_firsts AS SELECT * FROM cache_firsts WHERE ts >= {{.Since}} AND ts < {{.Until}};
{{- else}}
CREATE TEMP VIEW {{.Table}}_attempts AS SELECT * FROM cache_attempts;
CREATE TEMP VIEW {{.Table}}_time AS SELECT * FROM cache_time;
CREATE TEMP VIEW {{.Table}}_edges AS SELECT * FROM cache_edges;
CREATE TEMP VIEW {{.Table}}_groups AS SELECT * FROM cache_groups;
CREATE TEMP VIEW {{.Table}}_logical AS SELECT * FROM cache_logical;
CREATE TEMP VIEW {{.Table}}_firsts AS SELECT * FROM cache_firsts;
{{- end}}
{{end}}
