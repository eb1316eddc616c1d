-- The groups of {{.Key}} whose minutes can fire an alert: those among $3 (the groups whose
-- totals have that evidence) with a minute that has at least $1 first attempts and $2
-- retries, the least evidence an alert rule looks at (a minute with less is never firing,
-- see Rule.judge); only their minutes are read for the groups' alerts.
SELECT DISTINCT k FROM (
    SELECT ts, {{.Key}} AS k,
        coalesce(sum(n) FILTER (attempt = 0), 0) AS firsts,
        coalesce(sum(n) FILTER (attempt >= 1), 0) AS retries
    FROM {{.Counts}}
    WHERE ({{.Key}}) IN (SELECT unnest($3::VARCHAR[]))
    GROUP BY ts, k
)
WHERE firsts >= $1 AND retries >= $2
