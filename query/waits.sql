{{- /* What the backoff profile, the gap histogram and the synchronised finding read of the
attempts table (docs/metrics.md, "Backoff profile").

waited: the retries that waited for an answer: started after the attempts before them
ended. A hedge, sent while another attempt was in flight, has no wait: its delay is the
hedging report's.
gap_ms: how long a retry waited, in ms, from the previous attempt's end to its start; a
gap under 0 is within the log's clock resolution (prepare.sql, "slack") and counts as 0. */}}
{{define "waited"}}attempt >= 1 AND prev_end IS NOT NULL AND NOT hedge{{end}}
{{define "gap_ms"}}greatest(epoch_us(started) - epoch_us(prev_end), 0) / 1000.0{{end}}

{{/* The gaps of the retries that waited, per minute of their request's first attempt, each
with its place in the logs (the synchronised finding leaves out the loads timed to the
second, which a later load of the same file can change): what the backoff profile, the
gap histogram and the synchronised finding merge. */}}
{{define "gaps_partial"}}
SELECT {{minute "first_ts"}} AS minute, attempt, {{template "gap_ms"}} AS gap_ms, file_id, line
FROM {{.Table}}_attempts
WHERE {{template "waited"}} AND {{.Touched}}
ORDER BY minute, attempt, gap_ms
{{end}}
