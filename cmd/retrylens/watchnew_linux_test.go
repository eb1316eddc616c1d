package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrylens/retrylens/internal/testmain"
	"github.com/retrylens/retrylens/lab"
)

// A storm on an endpoint that did not exist reaches Prometheus's recorded ratios in the
// first rule evaluations after its requests close: watch serves the endpoint's series at
// 0 from the batch that first sees its lines, so increase() sees the storm's counts
// (created at their first increment, they read as a baseline and the storm as nothing).
// The lines are written here, stamped with the time of writing; the expected ratios are
// counted from what was written.
func TestNewEndpointStormRecorded(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// write appends one attempt of request id to the log, ending now
	write := func(uri, id string, attempt, status int) {
		now := time.Now().UTC()
		fmt.Fprintf(log, `10.0.0.9 - - [%s] "GET %s HTTP/1.1" %d 5 "-" "lab" rt=0.002 urt="0.002" us="%d" ra="%d" rr="-" rid="%s" ik="-" retry_after="-" msec=%d.%03d`+"\n",
			now.Format("02/Jan/2006:15:04:05 -0700"), uri, status, status, attempt, id, now.Unix(), now.Nanosecond()/1e6)
	}
	addr, err := lab.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	prom, err := lab.StartPrometheus(t.TempDir(), addr, filepath.Join("..", "..", "contrib", "prometheus", "retrylens.rules.yml"))
	if errors.Is(err, lab.ErrNoPrometheus) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Stop() })
	// a calm endpoint first, so that the watch has counters before the storm
	const calm = 20
	for i := range calm {
		write("/api/calm", fmt.Sprintf("c%d", i), 0, 200)
	}
	startWatch(t, filepath.Join(t.TempDir(), "w.duckdb"), addr, logPath)
	time.Sleep(3 * time.Second)
	// the storm: 100 requests on a new endpoint, each failed twice then answered, its
	// attempts a few milliseconds apart
	const storm = 100
	for i := range storm {
		id := fmt.Sprintf("s%d", i)
		write("/api/storm", id, 0, 503)
		write("/api/storm", id, 1, 503)
		write("/api/storm", id, 2, 200)
		time.Sleep(5 * time.Millisecond)
	}
	stormEnd := time.Now()
	// closed: --max-gap 5s and --settle 1s after the last line, 10 s windows
	var at time.Time
	for i := 0; ; i++ {
		if closed := value(get(t, "http://"+addr+"/metrics"), "retrylens_closed_until_seconds"); closed > float64(stormEnd.Unix())+1 {
			at = time.Now()
			break
		}
		if i == 600 {
			t.Fatalf("the storm's requests not closed 60 s after it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// a scrape and a rule evaluation (1 s each) after they closed
	for _, c := range []struct {
		q    string
		want float64
	}{
		{`endpoint:amplification:ratio5m{route="/api/storm"}`, 3},                        // 300 attempts, 100 first
		{`endpoint:retry_rate:ratio5m{route="/api/storm"}`, 1},                           // every request retried
		{`retrylens:amplification:ratio5m`, float64(calm+3*storm) / float64(calm+storm)}, // with the calm endpoint
	} {
		var got map[string]float64
		for i := 0; ; i++ {
			got, err = prom.Query(c.q, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			// increase() extrapolates each series to the range's ends by its own samples:
			// one endpoint's numerator and denominator alike, series born at different
			// scrapes not quite (2.66706 for 2.66667 in one run)
			if len(got) == 1 && math.Abs(only(got)-c.want) < 0.005*c.want {
				break
			}
			if i == 50 {
				t.Errorf("%s = %v 10 s after the storm closed (at %s), want %v", c.q, got, at.Format(time.TimeOnly), c.want)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// the storm endpoint's series was scraped at 0 before its requests closed
	q := `min_over_time(retrylens_attempts_total{route="/api/storm",attempt="first"}[2m])`
	if got, err := prom.Query(q, time.Now()); err != nil || len(got) != 1 || only(got) != 0 {
		t.Errorf("%s = %v, %v; want 0: the series before its requests closed", q, got, err)
	}
}

func only(m map[string]float64) float64 {
	for _, v := range m {
		return v
	}
	return math.NaN()
}
