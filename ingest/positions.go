package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"os"
	"slices"
	"sync"
	"syscall"
)

// Positions remembers where each file's loaded content ends and the hash state there,
// for a caller that loads the same growing files again and again (retrylens watch): a
// plain file that only grew is then read from where its last load ended, instead of being
// hashed again from its start to find its registered prefix. A file is known by device
// and inode, and by its first bytes, so that one truncated and written again past the old
// end (copytruncate while nobody looked) is read whole, as new content. What the
// registry no longer holds (another database, a repair) is not trusted either.
type Positions struct {
	mu      sync.Mutex
	m       map[fileKey]position
	resumed int // loads that went on from a position, for tests
}

type fileKey struct{ dev, ino uint64 }

type position struct {
	prefix        // the registered prefix the last load ended at
	state  []byte // SHA-256's state after it
	head   []byte // the file's first bytes (up to headBytes)
}

// headBytes is how much of a file's start tells it from a file rewritten in place.
const headBytes = 4096

// NewPositions returns an empty Positions.
func NewPositions() *Positions { return &Positions{m: map[fileKey]position{}} }

func inodeOf(f *os.File) (fileKey, bool) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return fileKey{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(sys.Dev), ino: sys.Ino}, true
}

func readHead(f *os.File, n int) []byte {
	b := make([]byte, n)
	got, _ := f.ReadAt(b, 0)
	return b[:got]
}

// resume finds where the last load of name ended, when that is still a registered
// prefix of its content: the prefix, and the hash state there.
func (p *Positions) resume(name string, known []prefix) (prefix, *countingHash, bool) {
	if p == nil {
		return prefix{}, nil, false
	}
	f, err := os.Open(name)
	if err != nil {
		return prefix{}, nil, false
	}
	defer f.Close()
	key, ok := inodeOf(f)
	if !ok || bytes.HasPrefix(readHead(f, 2), []byte{0x1f, 0x8b}) {
		return prefix{}, nil, false // gzip: positions are in decompressed bytes
	}
	p.mu.Lock()
	pos, ok := p.m[key]
	p.mu.Unlock()
	st, err := f.Stat()
	if !ok || err != nil || st.Size() < pos.bytes || !bytes.Equal(readHead(f, len(pos.head)), pos.head) {
		return prefix{}, nil, false
	}
	// Still registered, and nobody loaded on from there (an ingest of the same content
	// under another name): that one's lines would be loaded again.
	if !slices.ContainsFunc(known, func(k prefix) bool { return k.bytes == pos.bytes && k.sum == pos.sum }) ||
		slices.ContainsFunc(known, func(k prefix) bool { return k.from == pos.bytes }) {
		return prefix{}, nil, false
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(pos.state); err != nil {
		return prefix{}, nil, false
	}
	p.mu.Lock()
	p.resumed++
	p.mu.Unlock()
	return pos.prefix, &countingHash{Hash: h, n: pos.bytes}, true
}

// remember records that name's content was loaded up to end, with h's state there.
func (p *Positions) remember(name string, end, lines int64, h *countingHash) {
	if p == nil || h.n != end {
		return
	}
	f, err := os.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	key, ok := inodeOf(f)
	state, err := h.Hash.(encoding.BinaryMarshaler).MarshalBinary()
	if !ok || err != nil {
		return
	}
	head := readHead(f, int(min(end, headBytes)))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[key] = position{prefix: prefix{bytes: end, sum: hex.EncodeToString(h.Sum(nil)), lines: lines, path: name}, state: state, head: head}
}

// planResumed is planFile for a file whose first p.bytes are the registered prefix p:
// only its end is read, for its last line end.
func planResumed(name string, p prefix) (scan, error) {
	f, err := os.Open(name)
	if err != nil {
		return scan{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return scan{}, err
	}
	sc := scan{size: st.Size(), matched: p}
	sc.end, err = lastLineEnd(f, sc.size)
	return sc, err
}
