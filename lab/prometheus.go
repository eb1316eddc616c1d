package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoPrometheus means no prometheus binary was found.
var ErrNoPrometheus = errors.New("prometheus not found (Debian: apt-get install prometheus)")

// Prometheus is a running Prometheus server with its own config and data folder under
// a private directory, scraping one target every second.
type Prometheus struct {
	*server
	Addr string
}

// StartPrometheus starts Prometheus in dir, scraping target (host:port, /metrics) every
// second and evaluating the rule files given, and waits until it listens. Stop it with Stop.
func StartPrometheus(dir, target string, ruleFiles ...string) (*Prometheus, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, ErrNoPrometheus
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	rules := ""
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		rules += fmt.Sprintf("  - %q\n", abs)
	}
	if rules != "" {
		rules = "rule_files:\n" + rules
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
%sscrape_configs:
  - job_name: retrylens
    static_configs:
      - targets: ['%s']
`, rules, target)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir = dir
	p := &Prometheus{Addr: addr}
	if p.server, err = startServer("prometheus", cmd, addr, syscall.SIGTERM); err != nil {
		return nil, err
	}
	return p, nil
}

// Query evaluates an instant PromQL query at time at and returns each series's value
// by its labels (`{a="x", b="y"}`, sorted; `{}` for none).
func (p *Prometheus) Query(q string, at time.Time) (map[string]float64, error) {
	u := fmt.Sprintf("http://%s/api/v1/query?query=%s&time=%.3f", p.Addr, url.QueryEscape(q), float64(at.UnixMilli())/1000)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus query %q: %s", q, body.Error)
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		var keys []string
		for k, v := range r.Metric {
			if k != "__name__" {
				keys = append(keys, fmt.Sprintf("%s=%q", k, v))
			}
		}
		sort.Strings(keys)
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus query %q: value %v", q, r.Value[1])
		}
		out["{"+strings.Join(keys, ", ")+"}"] = v
	}
	return out, nil
}
