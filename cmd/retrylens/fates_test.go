package main

import (
	"encoding/json"
	"testing"
)

// The fates of requests whose client states its cap (testdata/stopped-below-cap,
// EXPECTED.md, worked by hand): those that stopped below it on a failure the client
// retries are told from those exhausted at it and those never retried.
func TestFates(t *testing.T) {
	t.Parallel()
	out, stderr, code := retrylens(t, nil, "report", "--format", "json", "--log-format", "retry-sdk-full", scenario("stopped-below-cap"))
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	var got struct {
		Summary struct {
			Requests  int `json:"requests"`
			Retries   int `json:"retries"`
			Recovered int `json:"recovered"`
			Exhausted int `json:"exhausted"`
		} `json:"summary"`
		Layers struct {
			Fates jsonFates `json:"fates"`
		} `json:"layers"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if s := got.Summary; s.Requests != 12 || s.Retries != 4 || s.Recovered != 1 || s.Exhausted != 2 {
		t.Errorf("summary %+v: want 12 attempts, 4 retries, 1 recovered, 2 exhausted", s)
	}
	want := jsonFates{Logical: 8, FirstTry: 1, Client: 1, Exhausted: 1, BudgetDenied: 3, FailedWithoutRetry: 2}
	if got.Layers.Fates != want {
		t.Errorf("fates %+v, want %+v", got.Layers.Fates, want)
	}
}

// jsonFates is the JSON report's layers.fates (docs/json.md).
type jsonFates struct {
	Logical            int `json:"logical_requests"`
	FirstTry           int `json:"first_try"`
	Gateway            int `json:"recovered_by_gateway"`
	Client             int `json:"recovered_by_client"`
	Exhausted          int `json:"exhausted"`
	BudgetDenied       int `json:"budget_denied"`
	FailedWithoutRetry int `json:"failed_without_retry"`
}
