package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/retrylens/retrylens/parse"
)

// input is one log stream, decompressed.
type input struct {
	name string
	r    *bufio.Reader
	size int64 // decompressed bytes read so far, counted by the reader
	c    io.Closer
	gz   *gzip.Reader
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// openInput opens a file, or stdin for "-", and undoes gzip when the content starts with
// gzip's magic bytes, whatever the name says.
func openInput(name string, stdin io.Reader) (*input, error) {
	in := &input{name: name}
	var src io.Reader
	if name == "-" {
		src = stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			return nil, fmt.Errorf("%s is a directory", name)
		}
		src, in.c = f, f
	}
	br := bufio.NewReaderSize(src, 256<<10)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			in.Close()
			return nil, fmt.Errorf("gzip: %w", err)
		}
		in.gz = gz
		br = bufio.NewReaderSize(gz, 256<<10)
	}
	in.r = bufio.NewReaderSize(countingReader{br, &in.size}, 256<<10)
	return in, nil
}

func (in *input) Close() error {
	if in.gz != nil {
		in.gz.Close()
	}
	if in.c != nil {
		return in.c.Close()
	}
	return nil
}

// fileDigest returns the sha256 of a file's decompressed content and its size.
func fileDigest(name string) (string, int64, error) {
	in, err := openInput(name, nil)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in.r)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// detectLines is how many non-blank lines format detection looks at.
const detectLines = 20

// ErrUnknownFormat means no preset matches the start of a file.
var ErrUnknownFormat = errors.New("no known log format matches")

// firstLines returns up to n non-blank lines from the start of r without consuming them.
func firstLines(r *bufio.Reader, n int) [][]byte {
	peek, _ := r.Peek(1 << 20)
	var lines [][]byte
	for len(peek) > 0 && len(lines) < n {
		i := bytes.IndexByte(peek, '\n')
		if i < 0 {
			i = len(peek)
		}
		if l := bytes.TrimSpace(peek[:i]); len(l) > 0 {
			lines = append(lines, peek[:i])
		}
		peek = peek[min(i+1, len(peek)):]
	}
	return lines
}

// ErrWrongFormat means most of a file's first lines do not parse in the format given.
var ErrWrongFormat = errors.New("most of the first lines do not match")

// checkFormat refuses a file whose first lines mostly fail in format f, before any row
// is loaded, and says which preset would fit better.
func checkFormat(r *bufio.Reader, f *parse.Format) error {
	lines := firstLines(r, detectLines)
	bad := 0
	var first error
	for _, l := range lines {
		if _, err := f.ParseLine(l); err != nil {
			bad++
			if first == nil {
				first = err
			}
		}
	}
	if bad*2 <= len(lines) {
		return nil
	}
	hint := ""
	if d, err := Detect(r); err == nil {
		hint = fmt.Sprintf("; it looks like --log-format %s", d.Name)
	}
	return fmt.Errorf("format %s: %w: %d of the first %d lines fail, the first with: %v%s", f.Name, ErrWrongFormat, bad, len(lines), first, hint)
}

// Detect picks the preset that parses most of the first lines of r without consuming
// them. It fails when no preset parses at least half of them, naming the closest preset
// and its first error, so that the user knows what to fix.
func Detect(r *bufio.Reader) (*parse.Format, error) {
	lines := firstLines(r, detectLines)
	if len(lines) == 0 {
		return parse.Preset("retry") // empty input: nothing to get wrong
	}
	var best *parse.Format
	bestOK := -1
	var bestErr error
	for _, name := range []string{"retry", "nginx-json", "combined"} {
		f, _ := parse.Preset(name)
		ok := 0
		var first error
		for _, l := range lines {
			if _, err := f.ParseLine(l); err == nil {
				ok++
			} else if first == nil {
				first = err
			}
		}
		if ok > bestOK {
			best, bestOK, bestErr = f, ok, first
		}
	}
	if bestOK*2 < len(lines) {
		return nil, fmt.Errorf("%w: closest is %q, which parsed %d of the first %d lines; its first error: %v; give the format with --nginx-format '<log_format string>'",
			ErrUnknownFormat, best.Name, bestOK, len(lines), bestErr)
	}
	return best, nil
}
