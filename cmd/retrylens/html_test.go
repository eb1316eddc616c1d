package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
	"github.com/retrylens/retrylens/report"
)

// hostileLog is a retry-format log whose fields an attacker chose: a URI with a script
// element, a user agent with an event handler, request ids that close an attribute and
// carry a terminal escape (nginx writes '"' and ESC as \x22 and \x1B). Each request is
// retried so that its fields reach the endpoint, 429-loop and findings tables.
func hostileLog(t *testing.T) string {
	t.Helper()
	line := func(sec int, method, uri, ua string, status, attempt int, rid string) string {
		ts := time.Date(2026, 11, 29, 14, 0, sec, 0, time.UTC)
		return fmt.Sprintf(`10.6.6.6 - - [%s] "%s %s HTTP/1.1" %d 2 "-" "%s" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="%s" ik="-" retry_after="-" msec=%d.000`,
			ts.Format("02/Jan/2006:15:04:05 -0700"), method, uri, status, ua, status, attempt, rid, ts.Unix()) + "\n"
	}
	const uri = `/api/<script>window.pwned=1</script>/x`
	const ua = `<svg onload=window.pwned=2>`
	const rid1 = `\x22><img src=x onerror=window.pwned=3>\x1B[31m`
	const rid2 = `'><b onmouseover=window.pwned=4>=HYPERLINK("x")`
	var b strings.Builder
	b.WriteString(line(0, "POST", uri, ua, 502, 0, rid1))
	b.WriteString(line(2, "POST", uri, ua, 200, 1, rid1))
	b.WriteString(line(10, "GET", uri, ua, 429, 0, rid2))
	b.WriteString(line(12, "GET", uri, ua, 429, 1, rid2))
	b.WriteString(line(14, "GET", uri, ua, 429, 2, rid2))
	path := filepath.Join(t.TempDir(), "hostile.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHTMLHostileFields proves that no log field becomes markup: the page's elements are
// exactly those the template writes, no attribute is an event handler, the payloads are
// there as text, and no control character survives.
func TestHTMLHostileFields(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "page.html")
	if _, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", "1m", "--format", "html", "-o", out, hostileLog(t)); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(page)))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, el := range strings.Fields(`html head meta title style body header h1 h2 h3 p span b small div section ul li
		svg rect line polyline circle text br table thead tbody tr th td footer i`) {
		allowed[el] = true
	}
	var text strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			if !allowed[n.Data] {
				t.Errorf("element <%s> in the page: log text became markup", n.Data)
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") || strings.Contains(a.Val, "pwned") {
					t.Errorf("attribute %s=%q on <%s>", a.Key, a.Val, n.Data)
				}
			}
		case html.TextNode:
			text.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	got := text.String()
	// The payloads are shown as text: the route in the endpoint table, the request ids in
	// the findings and the 429-loop tables.
	for _, want := range []string{`<script>window.pwned=1</script>`, `"><img src=x onerror=window.pwned=3>`, `'><b onmouseover=window.pwned=4>=HYPERLINK("x")`} {
		if !strings.Contains(got, want) {
			t.Errorf("payload %q not shown as text", want)
		}
	}
	for _, c := range got {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Errorf("control character %U in the page's text", c)
			break
		}
	}
	if strings.ContainsRune(string(page), 0x1b) {
		t.Error("ESC in the page")
	}
}

// chromium finds Debian's chromium; CI must have it (.ci/run installs it).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found: .ci/run installs it")
	}
	t.Skip("chromium not installed (apt-get install chromium)")
	return ""
}

// browser starts headless Chromium with a window of w×h pixels and returns a tab's
// context, which gives up after 60 s; cancel closes it all.
func browser(t *testing.T, w, h int) (context.Context, context.CancelFunc) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short starts no browser")
	}
	// Chromium leaves org.chromium.Chromium.* directories in $TMPDIR: give it its own,
	// removed once it has exited.
	tmp, err := os.MkdirTemp("", "retrylens-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(w, h),
		chromedp.Env("TMPDIR="+tmp),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	return bctx, func() { cancelB(); cancelA(); cancel(); os.RemoveAll(tmp) }
}

// openInBrowser opens a file in headless Chromium and returns the counts of what the page
// rendered, every console message and exception, a full-page screenshot and the page
// printed to PDF.
type pageFacts struct {
	Charts, Series, AlertBands, Incidents, Bars, Tables, Rows, Scripts int
	Verdict                                                            string
	Pwned                                                              bool
	Width, Height                                                      float64
}

func openInBrowser(t *testing.T, path string) (pageFacts, []string, []byte, []byte) {
	t.Helper()
	bctx, cancelB := browser(t, 1280, 900)
	defer cancelB()
	var mu sync.Mutex // the listener runs on chromedp's goroutine
	var problems []string
	err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value))
			}
			problems = append(problems, fmt.Sprintf("console.%s %s", ev.Type, strings.Join(args, " ")))
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			problems = append(problems, fmt.Sprintf("log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
		}
	})
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	// chromedp enables the Runtime and Log domains on every tab.
	err = chromedp.Do(bctx, chromedp.Navigate("file://"+path), chromedp.WaitReady("footer"))
	var facts pageFacts
	var shot, pdf []byte
	if err == nil {
		facts, err = chromedp.Run(bctx, chromedp.Evaluate[pageFacts](`({
			Charts: document.querySelectorAll("svg.chart").length,
			Series: document.querySelectorAll("svg.timeline polyline.series").length,
			AlertBands: document.querySelectorAll("svg.timeline rect[class^=alert-]").length,
			Incidents: document.querySelectorAll("svg.timeline rect.incident").length,
			Bars: document.querySelectorAll("svg rect.bar").length,
			Tables: document.querySelectorAll("table").length,
			Rows: document.querySelectorAll("tbody tr").length,
			Scripts: document.scripts.length,
			Verdict: document.getElementById("verdict").textContent,
			Pwned: "pwned" in window,
			Width: document.querySelector("svg.timeline").getBoundingClientRect().width,
			Height: document.querySelector("svg.timeline").getBoundingClientRect().height,
		})`))
	}
	if err == nil {
		shot, err = chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG
	}
	if err == nil {
		pdf, err = chromedp.Run(bctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			res, err := cdp.Call(ctx, t, page.PrintToPDF, page.PrintToPDFParams{})
			return res.Data, err
		})
	}
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	cancelB() // closes the tab: no more events
	mu.Lock()
	defer mu.Unlock()
	return facts, append([]string(nil), problems...), shot, pdf
}

// TestHTMLInBrowser renders the incident sample's page, opens it from a file in headless
// Chromium and checks what a reader would see. The expected counts come from
// testdata/incident-hour/EXPECTED.md: the three alerts of TestCheck, one incident, 3 bars
// for 1, 2 and 3 attempts, 2 gap histograms (retries 1 and 2) of 11 buckets each, the two
// 429×2 loops, the synchronised finding.
func TestHTMLInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short starts no browser")
	}
	t.Parallel()
	dir := t.TempDir()
	pagePath := filepath.Join(dir, "postmortem.html")
	if _, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", "10m", "--format", "html", "-o", pagePath, scenario("incident-hour")); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	facts, problems, shot, pdf := openInBrowser(t, pagePath)
	want := pageFacts{
		Charts:     5, // timeline, load, attempts, 2 gap histograms
		Series:     5, // amplification, retry rate, 5xx, 429 and abandoned share: each one unbroken line
		AlertBands: 3, // retry_rate_high, retries_not_helping, retry_storm
		Incidents:  1,
		Bars:       3 + 2*11,
		Tables:     4,                 // windows, endpoints, 429 loops, findings
		Rows:       6 + 1 + 1 + 2 + 1, // six 10-minute windows + all, one endpoint, the two 429×2 loops, synchronised
		Verdict:    "fuelling",
	}
	if facts.Width < 600 || facts.Height < 150 {
		t.Errorf("timeline laid out %.0f×%.0f px: want at least 600×150", facts.Width, facts.Height)
	}
	facts.Width, facts.Height = 0, 0
	if facts != want {
		t.Errorf("page:\n got %+v\nwant %+v", facts, want)
	}
	for _, p := range problems {
		t.Errorf("browser reported: %s", p)
	}
	// Printed (A4/Letter by Chromium's default), the postmortem is a few pages, not one per
	// table row or chart.
	pages := bytes.Count(pdf, []byte("/Type /Page")) - bytes.Count(pdf, []byte("/Type /Pages"))
	if !bytes.HasPrefix(pdf, []byte("%PDF")) || pages < 1 || pages > 6 {
		t.Errorf("printed: %d bytes, %d pages; want a PDF of 1 to 6 pages", len(pdf), pages)
	}
	t.Logf("printed: %d pages", pages)
	shotPath := os.Getenv("RETRYLENS_SCREENSHOT")
	if shotPath == "" {
		shotPath = filepath.Join(dir, "postmortem.png")
	}
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shotPath, len(shot))

	// The hostile page: no script ran, nothing was loaded, no console error.
	hostile := filepath.Join(dir, "hostile.html")
	if _, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", "1m", "--format", "html", "-o", hostile, hostileLog(t)); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	facts, problems, _, _ = openInBrowser(t, hostile)
	if facts.Pwned || facts.Scripts != 0 {
		t.Errorf("hostile page ran a script: %+v", facts)
	}
	for _, p := range problems {
		t.Errorf("browser reported on the hostile page: %s", p)
	}
}

// No output format carries a raw control byte from the logs: the hostile log's request ids
// hold ESC (nginx writes it \x1B), and a user agent here holds BEL, in every format, every
// CSV section, and query's CSV.
func TestNoControlBytesInAnyFormat(t *testing.T) {
	testmain.Long(t, "every format of a hostile log")
	t.Parallel()
	src, err := os.ReadFile(hostileLog(t))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "bel.log")
	os.WriteFile(log, []byte(strings.ReplaceAll(string(src), "<svg onload", `\x07<svg onload`)), 0o644)
	db := filepath.Join(t.TempDir(), "h.duckdb")
	if _, stderr, code := retrylens(t, nil, "ingest", "--quiet", "--log-format", "retry", "--db", db, log); code != 0 {
		t.Fatal(stderr)
	}
	var runs [][]string
	for _, f := range []string{"table", "tsv", "markdown", "json", "html"} {
		runs = append(runs, []string{"report", "--db", db, "--window", "1m", "--by", "route", "--format", f})
	}
	for _, s := range report.Sections {
		if testing.Short() && s != "windows" {
			continue // -short: the CSV renderer once
		}
		runs = append(runs, []string{"report", "--db", db, "--window", "1m", "--by", "route", "--format", "csv", "--section", s})
	}
	runs = append(runs, []string{"query", "--db", db, "--format", "csv", "SELECT key_text, user_agent, uri FROM requests"})
	for _, args := range runs {
		out, stderr, code := retrylens(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%v: a raw ESC or BEL in the output", args)
		}
		if strings.Contains(args[len(args)-1], "key_text") && !strings.Contains(out, `\x1b[31m`) {
			t.Errorf("%v: the escape is not shown escaped:\n%s", args, out)
		}
	}
}

// A chaos test's minute at --window 10s, in headless Chromium 1400 px wide: the timeline
// has a point per 10 s (six hover bands), its time labels show seconds, no two texts of
// the timeline overlap, and the page does not scroll sideways. The log: one request a
// second for 60 s, those started in 14:00:20–14:00:39 failing once (502) and retried.
func TestHTMLShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short starts no browser")
	}
	t.Parallel()
	var b strings.Builder
	for s := range 60 {
		statuses := []int{200}
		if s >= 20 && s < 40 {
			statuses = []int{502, 200}
		}
		for attempt, status := range statuses {
			fmt.Fprintf(&b, `10.0.0.1 - - [29/Nov/2026:14:00:%02d +0000] "GET /api/x HTTP/1.1" %d 2 "-" "c" rt=0.010 urt="0.010" us="%d" ra="%d" rr="-" rid="r%d" ik="-" retry_after="-" msec=%d.%03d`+"\n",
				s, status, status, attempt, s, 1795960800+s, 100+500*attempt)
		}
	}
	dir := t.TempDir()
	log, page := filepath.Join(dir, "chaos.log"), filepath.Join(dir, "chaos.html")
	os.WriteFile(log, []byte(b.String()), 0o644)
	if _, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", "10s", "-o", page, log); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	checkShortRunPage(t, page, 6)
}

// checkShortRunPage opens a report of a short run at --window 10s in headless Chromium
// 1400 px wide: the timeline has points hover bands (one per 10 s with traffic), its time
// labels show seconds, no two texts of the timeline overlap, and the page does not
// scroll sideways.
func checkShortRunPage(t *testing.T, page string, points int) {
	t.Helper()
	bctx, cancel := browser(t, 1400, 900)
	defer cancel()
	type facts struct {
		Points, Overlaps, ScrollWidth, ViewWidth int
		Labels                                   []string
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+page), chromedp.WaitReady("footer")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[facts](`(() => {
		const texts = [...document.querySelectorAll("svg.timeline text")].map(e => e.getBoundingClientRect());
		let overlaps = 0;
		for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
			const a = texts[i], b = texts[j];
			if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlaps++;
		}
		return {
			Points: document.querySelectorAll("svg.timeline rect.hover").length,
			Overlaps: overlaps,
			ScrollWidth: document.documentElement.scrollWidth,
			ViewWidth: window.innerWidth,
			Labels: [...document.querySelectorAll("svg.timeline text")].map(e => e.textContent).filter(s => /^\d\d:\d\d/.test(s)),
		};
	})()`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if got.Points != points || got.Overlaps != 0 || got.ScrollWidth > got.ViewWidth || len(got.Labels) == 0 {
		t.Errorf("page: %+v; want %d points, no overlap, no sideways scroll, time labels", got, points)
	}
	for _, l := range got.Labels {
		if len(l) != len("14:00:10") {
			t.Errorf("time label %q: want seconds (hh:mm:ss)", l)
		}
	}
}

// chaosMinute is the same on a real minute: 60 s of the lab client through a real nginx,
// one request a second from each of two workers, 25 % of answers failing in its middle.
// The points expected are the 10 s buckets of nginx's own $msec times in its log.
// TestLab runs it beside its scenarios (most of the minute is waiting) and checks it with
// checkChaosMinute.
func chaosMinute(dir string) (textLog string, err error) {
	u, err := lab.StartUpstream()
	if err != nil {
		return "", err
	}
	defer u.Close()
	n, err := lab.StartNginx(dir, u.Addr)
	if err != nil {
		return "", err
	}
	sc := lab.Scenario{Name: "chaos-minute", Policy: lab.Good, Workers: 2, Pace: time.Second,
		Requests: lab.Requests("m", 120, http.MethodGet, "/api/items/%d"),
		Faults:   lab.Faults{Seed: 3, IncidentFrom: 20 * time.Second, IncidentTo: 35 * time.Second, IncidentFail: 0.25}}
	sc.Run(n.URL(), u)
	return n.TextLog, n.Stop()
}

func checkChaosMinute(t *testing.T, textLog string) {
	raw, err := os.ReadFile(textLog)
	if err != nil {
		t.Fatal(err)
	}
	buckets := map[int64]bool{}
	for _, m := range regexp.MustCompile(`msec=(\d+)\.`).FindAllStringSubmatch(string(raw), -1) {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		buckets[sec/10] = true
	}
	page := filepath.Join(t.TempDir(), "minute.html")
	if _, stderr, code := retrylens(t, nil, "report", "--log-format", "retry", "--window", "10s", "-o", page, textLog); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	checkShortRunPage(t, page, len(buckets))
}
