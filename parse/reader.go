package parse

import (
	"bufio"
	"io"
	"unsafe"
)

// MaxLineLength is the longest line a Reader accepts; longer lines are skipped whole and
// reported with ErrLineTooLong.
const MaxLineLength = 1 << 20

// Reader reads Records from an access log, one per line, in the manner of encoding/csv.
type Reader struct {
	f    *Format
	br   *bufio.Reader
	line int
	buf  []byte
	last []byte // the line last read; valid until the next Read
	slab []byte // lines are copied here: one allocation per slab, not per line
}

// slabSize is the size of the blocks the Reader copies lines into. A Record's strings
// point into a slab, which the garbage collector frees once no Record holds it.
const slabSize = 64 << 10

// NewReader returns a Reader of r's lines in format f.
func NewReader(r io.Reader, f *Format) *Reader {
	return &Reader{f: f, br: bufio.NewReaderSize(r, 256<<10)}
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
	for {
		raw, err := r.readLine()
		if err != nil {
			*rec = Record{}
			return err
		}
		r.line++
		r.last = raw
		if raw == nil {
			*rec = Record{}
			return &Error{Line: r.line, Column: MaxLineLength + 1, Err: ErrLineTooLong, Detail: "longer than 1 MiB"}
		}
		if len(raw) == 0 || (len(raw) == 1 && raw[0] == '\r') {
			continue
		}
		if perr := r.f.parse(rec, r.intern(raw)); perr != nil {
			perr.Line = r.line
			*rec = Record{}
			return perr
		}
		return nil
	}
}

// intern copies a line into the current slab and returns it as a string. The slab's
// bytes are never written again once handed out, so the string is immutable.
func (r *Reader) intern(line []byte) string {
	if len(line) > slabSize/4 {
		return string(line)
	}
	if len(r.slab)+len(line) > cap(r.slab) {
		r.slab = make([]byte, 0, slabSize)
	}
	start := len(r.slab)
	r.slab = append(r.slab, line...)
	if len(line) == 0 {
		return ""
	}
	return unsafe.String(&r.slab[start], len(line))
}

// readLine returns the next line without its newline, nil for a line over MaxLineLength.
func (r *Reader) readLine() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], nil
	}
	if err != bufio.ErrBufferFull {
		if err == io.EOF && len(b) > 0 {
			return b, nil
		}
		return nil, err
	}
	r.buf = append(r.buf[:0], b...)
	tooLong := false
	for {
		b, err = r.br.ReadSlice('\n')
		if !tooLong {
			r.buf = append(r.buf, b...)
			tooLong = len(r.buf) > MaxLineLength
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		break
	}
	if tooLong {
		return nil, nil
	}
	if n := len(r.buf); n > 0 && r.buf[n-1] == '\n' {
		return r.buf[:n-1], nil
	}
	return r.buf, nil
}

// Excerpt returns up to n bytes of the line last read, as written, for reject samples.
func (r *Reader) Excerpt(n int) string {
	if len(r.last) > n {
		return string(r.last[:n])
	}
	return string(r.last)
}
