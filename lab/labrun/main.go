// Command labrun runs the lab's scenarios through real nginx and Caddy (Debian's
// packages, started unprivileged on 127.0.0.1) and keeps their logs and the client's
// truth, so that a person can run retrylens on them and compare:
//
//	go run ./lab/labrun -out lab-out
//	retrylens report --log-format retry lab-out/limited-naive/nginx/access.log
//	go run ./lab/labrun -out lab-out -scenario overload-naive   # lab.OverloadScenarios too
//
// The same runs, compared automatically, are TestLab in cmd/retrylens.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/retrylens/retrylens/lab"
)

func main() {
	out := flag.String("out", "lab-out", "directory for the logs and truth files")
	only := flag.String("scenario", "", "run only this scenario (the overload scenarios run only when named)")
	flag.Parse()
	if err := run(*out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "labrun:", err)
		os.Exit(1)
	}
}

func run(out, only string) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tgateway\trequests\tfirst\tretries\tampl.\tretry rate\tretry success\trecovered\texhausted\t429→retry\t429 loops\tpremature\tblind\tretried writes\tdup. writes\t")
	for _, sc := range append(lab.Scenarios(), lab.OverloadScenarios()...) {
		if only != "" && sc.Name != only || only == "" && sc.Rate > 0 {
			continue
		}
		for _, gw := range []string{"nginx", "caddy"} {
			dir, err := filepath.Abs(filepath.Join(out, sc.Name, gw))
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			t, dup, err := runOne(sc, gw, dir)
			if err != nil {
				return fmt.Errorf("%s via %s: %w", sc.Name, gw, err)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
				sc.Name, gw, t.Requests, t.FirstAttempts, t.Retries, t.Amplification, t.RetryRate, t.RetrySuccessRate,
				t.Recovered, t.Exhausted, t.Status429Retry, t.Loops429, t.PrematureRetries, t.BlindRetries, t.RetriedWrites, dup)
		}
	}
	fmt.Fprintf(os.Stdout, "logs and truth.json files under %s\n", out)
	return tw.Flush()
}

func runOne(sc lab.Scenario, gw, dir string) (lab.Truth, int, error) {
	u, err := lab.StartUpstream()
	if err != nil {
		return lab.Truth{}, 0, err
	}
	defer u.Close()
	var url string
	var stop func() error
	switch gw {
	case "nginx":
		n, err := lab.StartNginx(dir, u.Addr)
		if err != nil {
			return lab.Truth{}, 0, err
		}
		url, stop = n.URL(), n.Stop
	default:
		c, err := lab.StartCaddy(dir, u.Addr)
		if err != nil {
			return lab.Truth{}, 0, err
		}
		url, stop = c.URL(), c.Stop
	}
	c := sc.Run(url, u)
	if err := stop(); err != nil {
		return lab.Truth{}, 0, err
	}
	t := c.Truth()
	dup, _ := u.DuplicateWrites()
	b, err := json.MarshalIndent(struct {
		lab.Truth
		DuplicateWrites int
	}{t, dup}, "", "  ")
	if err != nil {
		return t, dup, err
	}
	return t, dup, os.WriteFile(filepath.Join(dir, "truth.json"), append(b, '\n'), 0o644)
}
