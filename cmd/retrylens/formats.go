package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retrylens/retrylens/parse"
)

func (e *env) formatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "formats",
		Short: "List the input format presets, with an example line each",
		Long:  help("formats.long.txt"),
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			example := parse.Record{
				Time: time.Date(2026, 11, 29, 14, 20, 1, 512e6, time.UTC), RemoteAddr: "10.0.0.7", Method: "GET",
				URI: "/api/orders/1042", Protocol: "HTTP/1.1", Status: 502, Bytes: 157, UserAgent: "checkout-web/2.3",
				RequestTime: 0.012, UpstreamStatus: "502", UpstreamResponseTime: "0.011", Attempt: 1,
				AttemptSource: "x-retry-attempt", RetryReason: "status_502", RequestID: "req-7f3a",
			}
			var b strings.Builder
			for _, p := range parse.Presets() {
				f, _ := parse.Preset(p.Name)
				line := p.Example
				if f.HasFormatter() {
					line = string(f.AppendRecord(nil, &example))
				}
				fmt.Fprintf(&b, "%s\n  %s; sees %s\n  %s\n", p.Name, p.About, p.Sees, line)
			}
			_, err := fmt.Fprint(e.stdout, b.String())
			return err
		},
	}
}
