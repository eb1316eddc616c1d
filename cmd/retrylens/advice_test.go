package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetLog is three clients, 10.0.0.1 to .3, each sending two requests that fail (503) and
// are rescued by one retry: client c's at c·100 ms and 1 s after, their retries 2 s after
// each. 6 first attempts, 6 retries (2.0x), 6 recovered.
func fleetLog(t *testing.T) string {
	t.Helper()
	const line = `10.0.0.%d - - [29/Nov/2026:10:00:0%d +0000] "GET /api/x HTTP/1.1" %d 2 "-" "shop/1.0" rt=0.010 urt="0.010" us="%[3]d" ra="%d" rr="-" rid="%s" ik="-" retry_after="-" msec=%.3f` + "\n"
	var rows []struct {
		at   float64
		text string
	}
	for c := 1; c <= 3; c++ {
		for j := 0; j < 2; j++ {
			start := float64(c-1)*0.1 + float64(j)
			key := fmt.Sprintf("c%d-r%d", c, j)
			for n, status := range []int{503, 200} {
				end := start + float64(n)*2 + 0.01
				rows = append(rows, struct {
					at   float64
					text string
				}{end, fmt.Sprintf(line, c, int(end), status, n, key, 1795975200+end)})
			}
		}
	}
	// the gateway writes a line when its request ends
	for i := range rows {
		for j := i + 1; j < len(rows); j++ {
			if rows[j].at < rows[i].at {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.text)
	}
	log := filepath.Join(t.TempDir(), "fleet.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return log
}

// budget --target-amplification says what to set, per client instance. Finagle's budget
// on fleetLog, worked by hand (ttl 10 s; the k-th retry in the window goes when k is at
// most percentCanRetry × its requests + minRetriesPerSec × 10), at most 1.2x:
//   - per client (3 instances, the log's addresses), 2 requests each: any floor lets both
//     retries go (2.0x); with none, a share s lets the first go from 0.5 (1 ≤ 2s), the
//     second at 1: 0.01 to 0.2 let none go (1.0x, 6 lost), 0.5 one each (1.5x). At most
//     1.2x: the first of those that let none go, 0.01, losing 6.
//   - as one instance (--instances 1), 6 requests: a share s lets 6s go: 0.2 one (7/6 =
//     1.17x, 5 lost), 0.1 and under none. At most 1.2x losing fewest: 0.2, 5 lost.
func TestBudgetAdvice(t *testing.T) {
	t.Parallel()
	log := fleetLog(t)
	type advice struct {
		Target struct {
			Amplification float64 `json:"amplification"`
		} `json:"target"`
		Recorded struct {
			Amplification float64 `json:"amplification"`
			Recovered     int     `json:"recovered"`
		} `json:"recorded"`
		OpenLoop        string `json:"open_loop"`
		Recommendations []struct {
			Model         string            `json:"model"`
			Met           bool              `json:"meets_target"`
			Instances     int               `json:"instances"`
			Settings      map[string]string `json:"settings"`
			Amplification float64           `json:"amplification"`
			Lost          int               `json:"recovered_lost"`
			Config        string            `json:"config"`
			Curve         []map[string]any  `json:"curve"`
		} `json:"recommendations"`
	}
	for _, c := range []struct {
		instances, share string
		n, lost          int
		amp              float64
	}{{"0", "0.01", 3, 6, 1}, {"1", "0.2", 1, 5, 7.0 / 6}} {
		stdout, stderr, code := retrylens(t, nil, "budget", "--target-amplification", "1.2", "--family", "finagle", "--instances", c.instances,
			"--format", "json", "--log-format", "retry", log)
		var a advice
		if code != 0 || json.Unmarshal([]byte(stdout), &a) != nil || len(a.Recommendations) != 1 {
			t.Fatalf("--instances %s: exit %d: %s%s", c.instances, code, stderr, stdout)
		}
		r := a.Recommendations[0]
		if a.Recorded.Amplification != 2 || a.Recorded.Recovered != 6 || !strings.Contains(a.OpenLoop, "open loop") {
			t.Errorf("--instances %s: %+v", c.instances, a)
		}
		if r.Model != "finagle" || !r.Met || r.Instances != c.n || r.Settings["percentCanRetry"] != c.share || r.Settings["minRetriesPerSec"] != "0" ||
			math.Abs(r.Amplification-c.amp) > 1e-9 || r.Lost != c.lost || !strings.Contains(r.Config, "percentCanRetry = "+c.share) || len(r.Curve) != 24 {
			t.Errorf("--instances %s: %s %v over %d instances, met %v, %.3gx, %d lost, %d points, %q; want %s over %d, %.3gx, %d lost, 24 points",
				c.instances, r.Model, r.Settings, r.Instances, r.Met, r.Amplification, r.Lost, len(r.Curve), r.Config, c.share, c.n, c.amp, c.lost)
		}
	}
	// the table names the setting and gives the configuration to paste
	stdout, _, code := retrylens(t, nil, "budget", "--target-amplification", "1.2", "--family", "finagle,grpc", "--format", "table", "--log-format", "retry", log)
	for _, want := range []string{"amplification at most 1.20x", "open loop", "percentCanRetry 0.01, minRetriesPerSec 0, ttl 10s",
		"RetryBudget(ttl = 10.seconds, minRetriesPerSec = 0, percentCanRetry = 0.01)", `"retryThrottling": {"maxTokens": `} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	// the page: the curve of each family, a point per setting, the chosen one marked
	page := filepath.Join(t.TempDir(), "advice.html")
	if _, stderr, code := retrylens(t, nil, "budget", "--target-amplification", "1.2", "--family", "finagle,grpc", "-o", page, "--log-format", "retry", log); code != 0 {
		t.Fatalf("-o advice.html: exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(page)
	html := string(b)
	if strings.Count(html, "<circle") != 24+30 || strings.Count(html, `class="chosen"`) != 2 || !strings.Contains(html, "Content-Security-Policy") ||
		!strings.Contains(html, "percentCanRetry = 0.01") {
		t.Errorf("the page has %d points (want 24 + 30), %d chosen (want 2):\n%.2000s", strings.Count(html, "<circle"), strings.Count(html, `class="chosen"`), html)
	}
	for _, args := range [][]string{
		{"--compare", "--format", "html"},
		{"--target-amplification", "0.5"}, {"--target-amplification", "1.2", "--compare"}, {"--instances", "3"},
		{"--target-amplification", "1.2", "--family", "nope"}, {"--max-lost", "-2"},
	} {
		if _, stderr, code := retrylens(t, nil, append(append([]string{"budget"}, args...), log)...); code != exitUsage {
			t.Errorf("budget %v: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}
