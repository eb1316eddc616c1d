//go:build e2e

package testmain

// EndToEnd: built with -tags e2e (see tier.go).
const EndToEnd = true
