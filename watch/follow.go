package watch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrylens/retrylens/ingest"
)

// follower finds what to load at each batch: the files the arguments name now (globs
// expanded again, rotated sets oldest first), and a file that was renamed away from a
// followed name (rename rotation: nginx writes to it until it reopens its logs), found
// again by its inode in the same folder. Every file is loaded through the store's
// registry of loaded content, which makes loading exactly once whatever the follower
// hands it; the follower only saves work: a file whose size and modification time have
// not changed since it was loaded to its end is not read again.
type follower struct {
	mu    sync.Mutex // the metrics read lagBytes while a batch runs
	args  []string
	files map[fileID]*followed
	batch []*followed // what inputs handed the batch
	// rotations counts names that came to point at another file (rename rotation) and
	// files that got shorter (copytruncate, truncation).
	rotations int64
	rotated   []string // the names rotated since rotatedNames last took them
	// missing are the arguments that named no file when last looked at, and said says
	// which of them were reported (once each, until they name one).
	missing, said map[string]bool
}

type fileID struct{ dev, ino uint64 }

type followed struct {
	id    fileID
	path  string // where it was last seen
	size  int64  // as it was before its last load, which read it to its end
	mtime time.Time
	done  bool        // loaded, at that size
	seen  os.FileInfo // at this batch's start, before the load
	head  []byte      // its first bytes then: a file truncated and written again past its old size starts otherwise
}

func newFollower(args []string) *follower {
	return &follower{args: args, files: map[fileID]*followed{}, said: map[string]bool{}}
}

// inputs returns the files to load now: every file the arguments name whose content may
// have changed since it was loaded, and files renamed away from a followed name. A glob
// that matches nothing yet, or a file that does not exist yet, is no error: it may appear.
func (f *follower) inputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var args []string
	f.missing = map[string]bool{}
	for _, a := range f.args {
		if _, err := os.Stat(a); err == nil {
			args = append(args, a)
		} else if m, _ := filepath.Glob(a); len(m) > 0 && strings.ContainsAny(a, "*?[") {
			args = append(args, m...)
		} else {
			f.missing[a] = true
		}
	}
	named, err := ingest.Inputs(args)
	if err != nil {
		named = args
	}
	before := map[string]bool{} // the names followed files had
	for _, fl := range f.files {
		before[fl.path] = true
	}
	now := map[fileID]string{}
	for _, p := range named {
		if id, _, ok := stat(p); ok {
			now[id] = p
		}
	}
	// A followed file no argument names any more: renamed by logrotate into a name
	// outside the glob, or deleted. Found in its folder under another name, it is read
	// to its end once more.
	var moved []string
	for id, fl := range f.files {
		if _, ok := now[id]; ok {
			continue
		}
		if p := findInode(filepath.Dir(fl.path), id); p != "" {
			if _, size, ok := stat(p); ok && !(fl.done && size == fl.size) {
				moved = append(moved, p)
				fl.path = p
				continue
			}
			// Read to its end and unchanged for a batch: the writer has reopened its log.
		}
		delete(f.files, id) // done with, or gone: what was not read of it is lost (docs/live.md)
	}
	f.batch = f.batch[:0]
	var out []string
	for _, p := range moved {
		if id, _, ok := stat(p); ok {
			f.take(id, p)
			out = append(out, p)
		}
	}
	for _, p := range named {
		id, size, ok := stat(p)
		if !ok {
			continue
		}
		fl, known := f.files[id]
		if !known {
			if before[p] {
				f.rotations++ // a name that pointed at another file: rotation
				f.rotated = append(f.rotated, p+" (renamed)")
			}
			f.files[id] = &followed{id: id, path: p}
			if f.take(id, p) {
				out = append(out, p)
			}
			continue
		}
		fl.path = p
		if size < fl.size || fl.head != nil && !bytes.Equal(readHead(p, len(fl.head)), fl.head) {
			f.rotations++ // copytruncate or truncation: the registry sees new content
			f.rotated = append(f.rotated, p+" (truncated)")
		}
		if st, err := os.Stat(p); err != nil || fl.done && size == fl.size && st.ModTime().Equal(fl.mtime) {
			continue
		}
		if f.take(id, p) {
			out = append(out, p)
		}
	}
	return out
}

// take notes a file's size and time before the batch loads it.
func (f *follower) take(id fileID, p string) bool {
	st, err := os.Stat(p)
	if err != nil {
		return false
	}
	fl := f.files[id]
	if fl == nil {
		fl = &followed{id: id, path: p}
		f.files[id] = fl
	}
	fl.seen, fl.head = st, readHead(p, headBytes)
	f.batch = append(f.batch, fl)
	return true
}

// headBytes is how much of a file's start tells it from another.
const headBytes = 256

func readHead(path string, n int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	got, _ := f.ReadAt(b, 0)
	return b[:got]
}

// loaded records that the batch loaded its files: each to its end as it was before the
// load (lines written during it are read again next time, and the registry of loaded
// content leaves out what was loaded). A file whose name came to point at another file
// during the batch (a rotation between the look and ingest's open) may not have been
// read at all: it stays to be read at the next batch, where it is found by its inode.
func (f *follower) loaded() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.batch {
		if id, _, ok := stat(fl.path); !ok || id != fl.id {
			fl.done = false
			continue
		}
		fl.size, fl.mtime, fl.done = fl.seen.Size(), fl.seen.ModTime(), true
	}
	f.batch = f.batch[:0]
}

// lagBytes is how many bytes the followed files hold beyond what was loaded.
func (f *follower) lagBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, fl := range f.files {
		if _, size, ok := stat(fl.path); ok && size > fl.size {
			n += size - fl.size
		}
	}
	return n
}

func stat(path string) (fileID, int64, bool) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return fileID{}, 0, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, st.Size(), false
	}
	return fileID{dev: uint64(sys.Dev), ino: sys.Ino}, st.Size(), true
}

// findInode is the path in dir of the file with id, or "".
func findInode(dir string, id fileID) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if got, _, ok := stat(p); ok && got == id {
			return p
		}
	}
	return ""
}

// newlyMissing returns the arguments that name no file and were not said to before; an
// argument that names a file again may be said to again.
func (f *follower) newlyMissing() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.args {
		switch {
		case f.missing[a] && !f.said[a]:
			f.said[a] = true
			out = append(out, a)
		case !f.missing[a]:
			delete(f.said, a)
		}
	}
	return out
}

// rotatedNames returns the rotations seen since it was last called, a name each.
func (f *follower) rotatedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rotated
	f.rotated = nil
	return r
}

func (f *follower) rotationsSeen() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rotations
}
