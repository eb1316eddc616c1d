package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/internal/testmain"
)

// README's install path, as a new user follows it: a clone of the committed tree, go
// install ./cmd/retrylens with an empty module cache (every module from the proxy), then
// the installed binary names its commit and runs the quick start's job on the samples.
func TestInstallFromClone(t *testing.T) {
	testmain.EndToEndOnly(t)
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: nothing to clone")
	}
	dir := t.TempDir()
	clone := filepath.Join(dir, "retrylens")
	run := func(wd string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = wd, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(dir, nil, "git", "clone", "--quiet", root, clone)
	head := strings.TrimSpace(run(clone, nil, "git", "rev-parse", "HEAD"))
	bin := filepath.Join(dir, "bin")
	// GOFLAGS replaced: -modcacherw lets the test remove the cache; the stamping of the
	// commit is go's default (auto), whatever the machine's GOFLAGS say
	env := []string{"GOMODCACHE=" + filepath.Join(dir, "mod"), "GOBIN=" + bin, "GOFLAGS=-modcacherw"}
	run(clone, env, "go", "install", "./cmd/retrylens")
	rl := filepath.Join(bin, "retrylens")
	if v := run(clone, nil, rl, "version"); !strings.Contains(v, "(commit "+head[:12]+",") {
		t.Errorf("version of a clean clone at %s: %s", head[:12], v)
	}
	// the quick start's job, with the installed binary
	db := filepath.Join(dir, "demo.duckdb")
	run(clone, nil, rl, "ingest", "--quiet", "--db", db, "testdata/quiet-hour/access.log", "testdata/incident-hour/access.log")
	if out := run(clone, nil, rl, "report", "--db", db, "--window", "1h", "--format", "table"); !strings.Contains(out, "verdict: fuelling.") ||
		!strings.Contains(out, "What the business saw: 200 logical requests") {
		t.Errorf("the quick start's report from the installed binary:\n%s", out)
	}
}
