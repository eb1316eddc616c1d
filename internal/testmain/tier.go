//go:build !e2e

package testmain

// EndToEnd says whether the binary was built with -tags e2e: the tier of minute-long
// end-to-end runs (every lab scenario, the overload runs, the watch's rotations, the
// crash trials, the cluster's full comparison). Without it, each real component keeps a
// short smoke run in go test ./... (docs/internals.md, Development).
const EndToEnd = false
