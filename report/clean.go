package report

import "github.com/retrylens/retrylens/internal/sanitize"

// Clean makes attacker-controlled text safe for a terminal (see sanitize.Text).
func Clean(s string) string { return sanitize.Text(s) }
