package parse

import (
	"bytes"
	"io"
)

// MaxLineLength is the longest line a Reader accepts; longer lines are skipped whole and
// reported with ErrLineTooLong.
const MaxLineLength = 1 << 20

// Reader reads Records from an access log, one per line, in the manner of encoding/csv.
//
// It reads into blocks it never writes again once a line in them was handed out, so a
// Record's strings point straight into the block: no copy per line. A block is freed by
// the garbage collector once no Record holds a string of it.
type Reader struct {
	f        *Format
	src      io.Reader
	err      error  // the source's error, returned once the block is drained
	block    []byte // block[pos:end] is read and not yet handed out
	pos, end int
	line     int
	last     []byte // the line last read; valid until the next Read
	head     []byte // the start of the line too long to keep that readLine skipped last
}

// blockSize is the size of the blocks the Reader reads into. A line longer than a block
// gets a block of its own, up to MaxLineLength.
const blockSize = 256 << 10

// NewReader returns a Reader of r's lines in format f.
func NewReader(r io.Reader, f *Format) *Reader {
	return &Reader{f: f, src: r}
}

// StartAt numbers the next line n+1: for reading a file's tail after n lines.
func (r *Reader) StartAt(n int) { r.line = n }

// Line returns the 1-based number of the line last read.
func (r *Reader) Line() int { return r.line }

// Read returns the next Record. A malformed line returns an *Error carrying its line
// number; reading may go on after it. Blank lines are skipped silently. At the end Read
// returns io.EOF; a last line without a newline is still read.
func (r *Reader) Read() (Record, error) {
	var rec Record
	err := r.ReadInto(&rec)
	return rec, err
}

// ReadInto is Read into a Record the caller owns (a slot of a batch): no copy of the
// Record. On an error rec is left zero.
func (r *Reader) ReadInto(rec *Record) error {
	raw, err := r.Next()
	if err != nil {
		*rec = Record{}
		return err
	}
	if perr := r.f.ParseBytes(rec, raw); perr != nil {
		perr.Line = r.line
		return perr
	}
	return nil
}

// Next returns the next line that is not blank, without its newline, unparsed: for
// parsing on another goroutine (Format.ParseBytes), since the bytes are never written
// again. Line numbers it. A line over MaxLineLength returns an *Error carrying its number;
// reading may go on after it. At the end Next returns io.EOF.
func (r *Reader) Next() ([]byte, error) {
	for {
		raw, err := r.readLine()
		if err != nil {
			return nil, err
		}
		r.line++
		r.last = raw
		if raw == nil {
			return nil, &Error{Line: r.line, Column: MaxLineLength + 1, Err: ErrLineTooLong, Detail: "longer than 1 MiB", Head: r.head}
		}
		if len(raw) == 0 || (len(raw) == 1 && raw[0] == '\r') {
			continue
		}
		return raw, nil
	}
}

// readLine returns the next line without its newline, nil (and no error) for a line over
// MaxLineLength. The bytes returned are never written again.
func (r *Reader) readLine() ([]byte, error) {
	seen := 0 // the first seen bytes at r.pos hold no newline
	for {
		if k := bytes.IndexByte(r.block[r.pos+seen:r.end], '\n'); k >= 0 {
			k += seen
			if k > MaxLineLength {
				r.keepHead()
				r.pos += k + 1
				return nil, nil
			}
			line := r.block[r.pos : r.pos+k : r.pos+k]
			r.pos += k + 1
			return line, nil
		}
		if r.err != nil {
			if r.err == io.EOF && r.pos < r.end { // the last line, without its newline
				line := r.block[r.pos:r.end:r.end]
				r.pos = r.end
				if len(line) > MaxLineLength {
					r.keepHead()
					return nil, nil
				}
				return line, nil
			}
			return nil, r.err
		}
		if r.end-r.pos > MaxLineLength {
			r.keepHead()
			return nil, r.skipLine()
		}
		seen = r.end - r.pos
		r.fill()
	}
}

// keepHead copies the start of the line at r.pos, one too long to keep, for its Error.
func (r *Reader) keepHead() {
	r.head = bytes.Clone(r.block[r.pos:min(r.end, r.pos+HeadLength)])
}

// fill reads more of the source after what is buffered, first moving the partial line
// to a fresh block when the current one is full (the old block's bytes may be held by
// Records, so it is not reused).
func (r *Reader) fill() {
	if r.end == len(r.block) {
		n := r.end - r.pos
		b := make([]byte, max(blockSize, 2*n))
		copy(b, r.block[r.pos:r.end])
		r.block, r.pos, r.end = b, 0, n
	}
	for range 100 { // as bufio does, give up on a source that returns nothing forever
		n, err := r.src.Read(r.block[r.end:])
		r.end += n
		if err != nil {
			r.err = err
		}
		if n > 0 || err != nil {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// skipLine drops the rest of a line too long to keep, reading on to its newline. It
// returns an error only when the source fails before the end.
func (r *Reader) skipLine() error {
	// A fresh block: the current one holds lines already handed out.
	r.block, r.pos, r.end = make([]byte, blockSize), 0, 0
	for {
		r.fill()
		if k := bytes.IndexByte(r.block[:r.end], '\n'); k >= 0 {
			r.pos = k + 1
			return nil
		}
		if r.err != nil {
			r.pos = r.end
			if r.err == io.EOF {
				return nil
			}
			return r.err
		}
		r.end = 0 // nothing of this block was handed out: read over it
	}
}

// Excerpt returns up to n bytes of the line last read, as written, for reject samples.
func (r *Reader) Excerpt(n int) string {
	if len(r.last) > n {
		return string(r.last[:n])
	}
	return string(r.last)
}
