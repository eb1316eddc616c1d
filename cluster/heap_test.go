package cluster

import (
	"runtime/debug"
	"testing"
)

// Two loaders' working databases open at once in one process (the tests run several)
// hold the Go heap's soft limit until the last closes, then give the one before back,
// whichever order they close in; a release called twice counts once.
func TestHoldHeap(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	first, second := holdHeap(), holdHeap()
	if got := debug.SetMemoryLimit(-1); got != workHeap {
		t.Fatalf("held twice: limit %d, want %d", got, int64(workHeap))
	}
	first()
	first()
	if got := debug.SetMemoryLimit(-1); got != workHeap {
		t.Errorf("one of two released (twice): limit %d, want %d", got, int64(workHeap))
	}
	second()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("both released: limit %d, want the one before, %d", got, before)
	}
}
