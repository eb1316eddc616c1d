package promrules

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/judge"
)

var update = flag.Bool("update", false, "write the Prometheus rules file in contrib/")

// The rules file in the repository is what the generator writes from the default rules
// (go test ./watch/promrules -update writes it again), Prometheus's promtool accepts it, and its
// unit tests (contrib/prometheus/retrylens.rules.test.yml) pass: the alerts fire on a
// retry storm and a stalled watch, and stay quiet otherwise.
func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "contrib", "prometheus", "retrylens.rules.yml")
	var b bytes.Buffer
	if err := Write(&b, judge.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is not what 'retrylens watch --prometheus-rules' writes: go test ./watch/promrules -update", path)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (Debian: apt-get install prometheus)")
		}
		t.Skip("promtool not found (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "retrylens.rules.yml"}, {"test", "rules", "retrylens.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// Every recorded series the Grafana dashboard asks for is one the rules record: a panel
// over a renamed rule would draw nothing, without an error from Prometheus.
func TestDashboardReadsRecordedSeries(t *testing.T) {
	var rules bytes.Buffer
	if err := Write(&rules, judge.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "grafana", "retrylens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	recorded := regexp.MustCompile(`\b(?:retrylens|endpoint):[a-z0-9_]+:[a-z0-9_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range recorded.FindAllString(tg.Expr, -1) {
				n++
				if !strings.Contains(rules.String(), "record: "+name+"\n") {
					t.Errorf("panel %q reads %s, which the rules do not record", p.Title, name)
				}
			}
		}
	}
	if n == 0 {
		t.Error("the dashboard reads no recorded series")
	}
}
