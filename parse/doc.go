// Package parse turns access-log lines into Records.
//
// A Format is compiled once, from an nginx log_format string given verbatim or from a
// preset, and then walks each line with bytes-level scanning: no regular expressions.
// For the "retry" preset, the line
//
//	127.0.0.1 - - [29/Nov/2026:10:00:01 +0000] "GET /api/orders/7 HTTP/1.1" 502 157 "-" "lab/1.0" rt=0.012 urt="0.011" us="502" ra="1" rr="5xx" rid="r-17" ik="-" retry_after="-" msec=1795946401.012
//
// yields Time 2026-11-29T10:00:01.012Z (from $msec, the most precise clock), Method GET,
// URI /api/orders/7, Status 502, Attempt 1 (from x-retry-attempt), RetryReason "5xx",
// RequestID "r-17", and no IdempotencyKey or RetryAfter (nginx writes "-" for empty).
//
// Every string in a Record is valid UTF-8: nginx's \xXX escapes are decoded unless the
// decoded bytes would not be UTF-8, in which case the escaped text is kept as written.
package parse
