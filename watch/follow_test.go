package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A log renamed away from its name while a batch loads it (logrotate between the
// follower's look and ingest's open): the load may have read the new file under the old
// name, so the renamed one is read again at the next batch, not taken as read to its end.
func TestRenamedDuringBatch(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "access.log")
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(log, "first file, line 1\nline 2\n")
	f := newFollower([]string{log + "*"})
	if got := f.inputs(); !slices.Equal(got, []string{log}) {
		t.Fatalf("first batch: %q", got)
	}
	// the rotation lands while the batch loads
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	write(log, "second file\n")
	f.loaded()
	got := f.inputs()
	if !slices.Contains(got, log+".1") || !slices.Contains(got, log) {
		t.Fatalf("after a rotation during the batch, the next one loads %q: the renamed file's lines would be lost", got)
	}
	// once loaded with its name unchanged, an unchanged file is not read again
	f.loaded()
	if got := f.inputs(); len(got) != 0 {
		t.Fatalf("nothing changed, yet the batch loads %q", got)
	}
}
