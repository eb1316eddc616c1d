// Package testmain runs a package's tests so that what they leave behind goes with the
// test binary, even one killed with SIGKILL: t.TempDir folders are made under a folder of
// the binary's own, which it removes at its end and which the next run removes if the
// binary died first. (Servers the tests start die with it through lab's parent-death
// signal.)
package testmain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const prefix = "retrylens-test-"

// Run sweeps the folders of test binaries that are gone, points TMPDIR (and so
// t.TempDir) at a folder of this binary's own, runs the tests, then the cleanups (servers
// that use the folder) and stops the ClickHouse cluster ClusterURL started, and removes
// that folder. It returns m.Run's exit code.
func Run(m *testing.M, cleanups ...func()) int {
	base := os.TempDir()
	sweep(base)
	dir := filepath.Join(base, prefix+strconv.Itoa(os.Getpid()))
	// Open to all like the folder it is in: a test runs the binary as another user.
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testmain:", err)
		return m.Run()
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	stopClickHouse()
	os.Setenv("TMPDIR", base)
	os.RemoveAll(dir)
	return code
}

// sweep removes base's folders of test binaries whose process no longer runs.
func sweep(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), prefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || err != nil || alive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(base, e.Name()))
	}
}

// alive says whether a process pid runs (or may: one we may not signal is taken as alive).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}

// EndToEndOnly skips t unless the binary was built with -tags e2e.
func EndToEndOnly(t testing.TB) {
	t.Helper()
	if !EndToEnd {
		t.Skip("in the end-to-end tier: go test -tags e2e ./...")
	}
}

// Long skips t under -short, naming what it does: it runs in go test ./..., the tier
// before a commit; -short is the edit loop's.
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + ": in go test ./..., not -short")
	}
}
