#!/usr/bin/env python3
"""Writes the bundled scenario logs in nginx's `retry` log_format.

It is deliberately independent of retrylens's Go code (its own formatting, its own
clock arithmetic): the expected numbers in each scenario's EXPECTED.md were computed by
hand from the plan below, not from retrylens's output. Run it from testdata/ to
regenerate; the output is deterministic.
"""
from datetime import datetime, timedelta, timezone

UA = "checkout-web/2.3 (+okhttp)"


def line(t, addr, method, uri, status, attempt, rid, reason="-", rt=0.012):
    local = t.strftime("%d/%b/%Y:%H:%M:%S +0000")
    msec = "%d.%03d" % (int(t.timestamp()), t.microsecond // 1000)
    size = 2 if status == 200 else 157
    ra = "-" if attempt is None else str(attempt)
    return (f'{addr} - - [{local}] "{method} {uri} HTTP/1.1" {status} {size} "-" "{UA}"'
            f' rt={rt:.3f} urt="{rt:.3f}" us="{status}" ra="{ra}" rr="{reason}" rid="{rid}"'
            f' ik="-" retry_after="-" msec={msec}')


def request(out, t, n, statuses, prefix):
    """One logical request: attempt k at t + k seconds answered statuses[k]. Request ids
    are unique across the scenarios, as a client's would be."""
    for k, s in enumerate(statuses):
        reason = "-" if k == 0 else f"status_{statuses[k - 1]}"
        out.append((t + timedelta(seconds=k), line(t + timedelta(seconds=k), f"10.0.0.{n % 50 + 1}",
                                                   "GET", f"/api/orders/{1000 + n}", s, k, f"{prefix}-{n:04d}", reason)))


def health(out, t):
    out.append((t, line(t, "10.0.9.9", "GET", "/healthz", 200, None, "-")))


def write(path, rows, bad=None):
    rows.sort(key=lambda r: r[0])
    lines = [r[1] for r in rows]
    if bad:
        at, text = bad
        lines.insert(at - 1, text)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def quiet():
    t0 = datetime(2026, 11, 29, 9, 0, 0, 250000, tzinfo=timezone.utc)
    rows = []
    for i in range(120):  # one request every 30 s
        request(rows, t0 + timedelta(seconds=30 * i), i, [502, 200] if i == 37 else [200], "quiet")
    health(rows, t0 + timedelta(minutes=15, seconds=5))
    health(rows, t0 + timedelta(minutes=45, seconds=5))
    write("quiet-hour/access.log", rows)


def incident():
    t0 = datetime(2026, 11, 29, 14, 0, 0, 500000, tzinfo=timezone.utc)
    rows, inc = [], []
    for i in range(60):  # baseline: one request a minute
        t = t0 + timedelta(minutes=i)
        (inc if 20 <= i < 30 else rows).append((t, i))
    for j in range(20):  # the burst during the incident, 14:20:15.5 + 30 s steps
        inc.append((t0 + timedelta(minutes=20, seconds=15 + 30 * j), 100 + j))
    inc.sort()
    plan = [[502, 200]] * 10 + [[502, 502, 200]] * 8 + [[502, 502, 502]] * 7 + [[429, 429]] * 2 + [[200]] * 3
    out = []
    for t, n in rows:
        request(out, t, n, [200], "inc")
    for (t, n), statuses in zip(inc, plan):
        request(out, t, n, statuses, "inc")
    for m in (5, 25, 45):
        health(out, t0 + timedelta(minutes=m, seconds=30))
    # A line cut short, as a full disk leaves it: it must be reported as line 60.
    write("incident-hour/access.log", out, bad=(60, '10.0.0.7 - - [29/Nov/2026:14:31:0'))


if __name__ == "__main__":
    quiet()
    incident()
