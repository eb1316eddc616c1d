-- The gap histogram: per attempt number n >= 1, how many gaps between an attempt's start
-- and the previous attempt's end (gaps_partial) fall in each bucket of GapBuckets
-- (query/loops.go). $1 is the bucket edges in ms, ascending; bucket i holds gaps in
-- [edge i-1, edge i), the last one the gaps from the last edge on; with the sum of the gaps
-- (a Prometheus histogram's).
SELECT attempt, len(list_filter($1::DOUBLE[], lambda e: e <= gap_ms)) AS bucket, count(*), sum(gap_ms)
FROM {{.Part "gaps"}}
WHERE {{.Within}}
GROUP BY ALL
ORDER BY attempt, bucket
