package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunks reads content as a load does, chunk after chunk from pos, and returns each
// chunk as read.
func chunks(content string, pos, end, size int64) []string {
	r := bufio.NewReaderSize(strings.NewReader(content[pos:]), 16)
	var got []string
	for pos < end {
		b, err := io.ReadAll(&chunkReader{r: r, want: size - 1, left: end - pos})
		if err != nil || len(b) == 0 {
			break
		}
		got = append(got, string(b))
		pos += int64(len(b))
	}
	return got
}

// A chunk is whole lines, ending at the first line end that makes it at least the chunk
// size; the last ends at the end given (the file's last line end). Worked out by hand.
func TestChunkReader(t *testing.T) {
	t.Parallel()
	const content = "aa\nbbbb\nc\n\nddddddd\ne\n"
	tests := []struct {
		name      string
		pos, size int64
		want      []string
	}{
		{"one line each", 0, 1, []string{"aa\n", "bbbb\n", "c\n", "\n", "ddddddd\n", "e\n"}},
		{"a line end exactly at the size", 0, 3, []string{"aa\n", "bbbb\n", "c\n\n", "ddddddd\n", "e\n"}},
		{"past it to the next line end", 0, 4, []string{"aa\nbbbb\n", "c\n\nddddddd\n", "e\n"}},
		{"larger than the file", 0, 1 << 20, []string{content}},
		// Resumed after the load's first chunk of size 4: the same chunks after it.
		{"resumed", 8, 4, []string{"c\n\nddddddd\n", "e\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunks(content, tt.pos, int64(len(content)), tt.size)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks of %d bytes from %d (-want +got):\n%s", tt.size, tt.pos, diff)
			}
		})
	}
	// Never past the end given, even inside a line: "ddd" is a line still being written.
	if got := chunks("aa\nbbbb\nddd", 0, 8, 2); !cmp.Equal(got, []string{"aa\n", "bbbb\n"}) {
		t.Errorf("chunks before a last line still being written: %q", got)
	}
}

// planFile reads a plain file only as far as the longest registered length, and finds its
// last line end from the end; a gzip file it reads whole. The offsets are counted by hand.
func TestPlanFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, gz bool) string {
		path := filepath.Join(dir, name)
		var b bytes.Buffer
		if gz {
			w := gzip.NewWriter(&b)
			if _, err := w.Write([]byte(content)); err != nil || w.Close() != nil {
				t.Fatal("gzip", err)
			}
		} else {
			b.WriteString(content)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	long := strings.Repeat("x", 100<<10) + "\n" // past lastLineEnd's 64 KiB block
	tests := []struct {
		name, content string
		gz            bool
		known         []prefix
		size, end     int64
		matched       int64 // bytes of the prefix matched
	}{
		{"whole lines", "aa\nbbbb\n", false, nil, 8, 8, 0},
		{"a last line being written", "aa\nbbbb\ncc", false, nil, 10, 8, 0},
		{"no line end at all", "abc", false, nil, 3, 0, 0},
		{"empty", "", false, nil, 0, 0, 0},
		{"the line end a block back", long + "tail", false, nil, int64(len(long)) + 4, int64(len(long)), 0},
		{"a registered prefix", "aa\nbbbb\ncc\n", false, []prefix{{bytes: 3, sum: sum("aa\n")}, {bytes: 8, sum: sum("aa\nbbbb\n")}, {bytes: 11, sum: sum("other")}}, 11, 11, 8},
		{"a prefix of other content", "aa\nbbbb\n", false, []prefix{{bytes: 3, sum: sum("zz\n")}}, 8, 8, 0},
		{"gzip", "aa\nbbbb\ncc", true, []prefix{{bytes: 3, sum: sum("aa\n")}}, 10, 8, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(string(rune('a'+i))+".log", tt.content, tt.gz)
			sc, err := planFile(path, tt.known)
			if err != nil {
				t.Fatal(err)
			}
			if sc.size != tt.size || sc.end != tt.end || sc.matched.bytes != tt.matched {
				t.Errorf("size %d, end %d, matched %d bytes; want %d, %d, %d", sc.size, sc.end, sc.matched.bytes, tt.size, tt.end, tt.matched)
			}
		})
	}
	// A file cut shorter after its size was read (copytruncate) ends where it now ends.
	f, err := os.Open(write("cut.log", "aa\nbb\ncc", false))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if end, err := lastLineEnd(f, 100<<10); err != nil || end != 6 {
		t.Errorf("last line end of a file shorter than its size: %d, %v; want 6", end, err)
	}
}

// Whatever the content and chunk size, the chunks are the content up to its last line
// end, each whole lines that end at the first line end making them at least the size.
func FuzzChunkReader(f *testing.F) {
	f.Add("aa\nbbbb\nc\n\nddddddd\ne\n", uint8(4))
	f.Add("no line end", uint8(1))
	f.Add("\n\n\nx", uint8(2))
	f.Fuzz(func(t *testing.T, content string, size uint8) {
		n := int64(size%64) + 1
		end := int64(strings.LastIndexByte(content, '\n') + 1)
		got := chunks(content, 0, end, n)
		if joined := strings.Join(got, ""); joined != content[:end] {
			t.Fatalf("chunks of %d join to %q, want %q", n, joined, content[:end])
		}
		for i, c := range got {
			if !strings.HasSuffix(c, "\n") {
				t.Fatalf("chunk %d (%q) does not end a line", i, c)
			}
			// The first line end at or past n-1 closes the chunk: none before its last byte.
			if j := strings.IndexByte(c[min(int64(len(c)), n-1):], '\n'); int64(j)+min(int64(len(c)), n-1) != int64(len(c))-1 {
				t.Fatalf("chunk %d (%q) of size %d runs past the line end that closes it", i, c, n)
			}
			if i < len(got)-1 && int64(len(c)) < n {
				t.Fatalf("chunk %d (%q) is shorter than %d and not the last", i, c, n)
			}
		}
	})
}
