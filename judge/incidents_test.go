package judge

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIncidents(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	calm := func(i int) Window {
		return Window{Start: t0.Add(time.Duration(i) * time.Minute), Metrics: Metrics{Requests: 10, FirstAttempts: 10, Amplification: f(1), RetryRate: f(0)}}
	}
	var ms []Window
	for i := range 30 {
		ms = append(ms, calm(i))
	}
	ms[5].Amplification, ms[5].Retries = f(2), 5 // hot: 2 > 1.3
	ms[6].RetryRate, ms[6].Retries = f(0.5), 5   // hot: 0.5 > 0.05
	ms[8].Status5xx = Split{First: 3}            // hot: 3/10 > 0.05, one quiet minute after 6: same incident
	ms[20].Amplification, ms[20].RetryRate = f(1.25), f(0.04)
	ms[25].Status429 = Split{First: 2, Retry: 1}   // hot: 3/10 > 0.05, alone
	ms[28].Amplification, ms[28].Retries = f(2), 1 // above the limits, but one retry: no incident
	// one request tried three times, every attempt a 502: above every limit, but one first
	// attempt is not the evidence an alert needs (3)
	ms[15].Requests, ms[15].FirstAttempts, ms[15].Retries, ms[15].Amplification, ms[15].Status5xx = 3, 1, 2, f(3), Split{First: 1, Retry: 2}
	want := []Span{
		{Start: t0.Add(5 * time.Minute), End: t0.Add(9 * time.Minute)},
		{Start: t0.Add(25 * time.Minute), End: t0.Add(26 * time.Minute)},
	}
	if diff := cmp.Diff(want, Incidents(ms, DefaultRules())); diff != "" {
		t.Errorf("Incidents (-want +got):\n%s", diff)
	}
}

// At windows of 10 s an incident starts at its first hot window and ends with its last:
// 30 calm windows, 3 hot from 14:02:30 (the fourth, 14:03:00, quiet) make one incident
// [14:02:30, 14:03:00), not the minutes around it.
func TestIncidentsAt(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	var ws []Window
	for i := range 30 {
		ws = append(ws, Window{Start: t0.Add(time.Duration(i) * 10 * time.Second), Metrics: Metrics{Requests: 10, FirstAttempts: 10, Amplification: f(1), RetryRate: f(0)}})
	}
	for i := 15; i < 18; i++ {
		ws[i].Amplification, ws[i].RetryRate, ws[i].Retries = f(2), f(0.8), 10
	}
	want := []Span{{Start: t0.Add(150 * time.Second), End: t0.Add(180 * time.Second)}}
	if diff := cmp.Diff(want, IncidentsAt(ws, 10*time.Second, DefaultRules())); diff != "" {
		t.Errorf("IncidentsAt (-want +got):\n%s", diff)
	}
}
