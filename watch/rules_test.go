package watch

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/retrylens/retrylens/judge"
)

var update = flag.Bool("update", false, "write the Prometheus rules file in contrib/")

// The rules file in the repository is what the generator writes from the default rules
// (go test ./watch -update writes it again), Prometheus's promtool accepts it, and its
// unit tests (contrib/prometheus/retrylens.rules.test.yml) pass: the alerts fire on a
// retry storm and a stalled watch, and stay quiet otherwise.
func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "contrib", "prometheus", "retrylens.rules.yml")
	var b bytes.Buffer
	if err := PrometheusRules(&b, judge.DefaultRules()); err != nil {
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
		t.Errorf("%s is not what 'retrylens watch --prometheus-rules' writes: go test ./watch -update", path)
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
