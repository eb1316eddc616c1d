package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/traces"
)

// input is one log stream, decompressed.
type input struct {
	name string
	r    *bufio.Reader
	c    io.Closer
	gz   *gzip.Reader
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
	in.r = br
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

// spoolStream copies a stream (stdin for "-", a FIFO, a pipe, a character device) to a
// spool file, whose path it returns with stream true; a regular file is returned as it
// is. The copy is the stream's bytes as they came (gzip stays gzip).
func spoolStream(ctx context.Context, path string, opt Options) (string, bool, error) {
	var src io.Reader
	if path == "-" {
		if opt.Stdin == nil {
			return "", false, errors.New("no standard input")
		}
		src = opt.Stdin
	} else {
		st, err := os.Stat(path)
		if err != nil {
			return "", false, err
		}
		if st.Mode().IsRegular() || st.IsDir() {
			return path, false, nil // a directory fails in openInput, with its name
		}
		f, err := os.Open(path)
		if err != nil {
			return "", false, err
		}
		defer f.Close()
		src = f
	}
	tmp, err := createSpool(opt, "retrylens-stream-")
	if err != nil {
		return "", false, fmt.Errorf("spool the stream: %w", err)
	}
	_, err = io.Copy(tmp, readerCtx{ctx, src})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", false, fmt.Errorf("read the stream: %w", err)
	}
	return tmp.Name(), true, nil
}

// spoolTraces converts the file at path, when it holds traces (OTLP or Jaeger JSON,
// gzipped or not: traces.IsTraces), to attempt lines in a spool file beside streams'
// (Options.Spool), whose path it returns with what Convert read; "" for any other file.
func spoolTraces(ctx context.Context, path string, opt Options) (string, traces.Stats, error) {
	var st traces.Stats
	in, err := openInput(path, nil)
	if err != nil {
		return "", st, err
	}
	defer in.Close()
	if b, _ := in.r.Peek(64); !traces.IsTraces(b) {
		return "", st, nil
	}
	tmp, err := createSpool(opt, "retrylens-traces-")
	if err != nil {
		return "", st, fmt.Errorf("spool the traces: %w", err)
	}
	w := bufio.NewWriterSize(tmp, 256<<10)
	st, err = traces.Convert(readerCtx{ctx, in.r}, w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", st, fmt.Errorf("read the traces: %w", err)
	}
	return tmp.Name(), st, nil
}

// createSpool creates a spool file: under Options.Spool's prefix (beside the database, so
// that removeSpools finds a killed run's), else in the system's temporary folder named
// with prefix.
func createSpool(opt Options, prefix string) (*os.File, error) {
	dir := os.TempDir()
	if opt.Spool != "" {
		dir, prefix = filepath.Split(opt.Spool)
		if dir == "" {
			dir = "."
		}
	}
	return os.CreateTemp(dir, prefix+"*")
}

// readerCtx stops reading when its context is done.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// removeSpools removes the spool files a killed run left behind.
func removeSpools(spool string) {
	if spool == "" {
		return
	}
	dir, prefix := filepath.Split(spool)
	if dir == "" {
		dir = "."
	}
	entries, _ := os.ReadDir(dir) // not a glob: the database's name may hold * or [
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// prefix is a loaded prefix of some file's content: its length, hash, and the number
// of lines in it.
type prefix struct {
	bytes int64
	sum   string
	lines int64
	path  string
	from  int64 // where the load that registered it started
}

// scan is what planFile found of a file's content.
type scan struct {
	size  int64 // decompressed bytes
	lines int64 // newlines in the bytes read ahead: all of them for gzip (what truncated reports)
	// truncated: a gzip stream that ended early (broken says how); size is what could be
	// read, and only its whole lines are loaded.
	truncated bool
	broken    error
	end       int64  // just past the last newline: what can be loaded now
	matched   prefix // the longest registered prefix this content starts with; bytes 0 if none
}

// planFile finds what of a file to load: the longest registered prefix its content
// starts with, and where its last whole line ends. A plain file is read only as far as
// the longest registered length (not at all on its first load) and its last line end is
// found from its end backwards, so that a load reads it once. A gzip file is read whole
// first: only that finds where its content ends, or that its stream is cut short. The
// load cuts either into chunks as it reads them (chunkReader).
func planFile(name string, known []prefix) (scan, error) {
	in, err := openInput(name, nil)
	if err != nil {
		return scan{}, err
	}
	defer in.Close()
	f, ok := in.c.(*os.File)
	if in.gz != nil || !ok {
		return scanFile(in, known, -1)
	}
	st, err := f.Stat()
	if err != nil {
		return scan{}, err
	}
	var longest int64
	for _, p := range known {
		longest = max(longest, p.bytes)
	}
	var sc scan
	if longest > 0 {
		if sc, err = scanFile(in, known, longest); err != nil {
			return sc, err
		}
	}
	sc.size = st.Size()
	sc.end, err = lastLineEnd(f, sc.size)
	return sc, err
}

// lastLineEnd is the offset just past the last newline in f's first size bytes (0 if
// there is none), read backwards from size. A file cut shorter meanwhile (copytruncate)
// ends where it now ends.
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("read the end of the file: %w", err)
		}
		b := buf[:n]
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// chunkReader is one chunk of a file as the load reads it from r: want bytes, then on to
// the first line end, never past left bytes (the file's last line end). With want one
// less than the chunk size, a chunk ends at the first line end that makes it at least
// that long; a load killed after it resumes there and cuts the same chunks after it.
type chunkReader struct {
	r          *bufio.Reader
	want, left int64
	done       bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.done || c.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	if c.want > 0 {
		if int64(len(p)) > c.want {
			p = p[:c.want]
		}
		n, err := c.r.Read(p)
		c.want -= int64(n)
		c.left -= int64(n)
		return n, err
	}
	if _, err := c.r.Peek(1); err != nil {
		return 0, err // the file is shorter than it was: the chunk ends here
	}
	b, _ := c.r.Peek(min(len(p), c.r.Buffered()))
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b, c.done = b[:i+1], true
	}
	n := copy(p, b)
	c.r.Discard(n)
	c.left -= int64(n)
	return n, nil
}

// scanFile reads in's decompressed content in one pass, or its first limit bytes when
// limit >= 0, hashing it as far as the longest length in known and checking at each
// whether the content so far is that registered prefix.
func scanFile(in *input, known []prefix, limit int64) (scan, error) {
	var sc scan
	var src io.Reader = in.r
	if limit >= 0 {
		src = io.LimitReader(in.r, limit)
	}
	byLen := map[int64][]prefix{}
	var lens []int64
	for _, p := range known {
		if _, ok := byLen[p.bytes]; !ok {
			lens = append(lens, p.bytes)
		}
		byLen[p.bytes] = append(byLen[p.bytes], p)
	}
	sort.Slice(lens, func(i, j int) bool { return lens[i] < lens[j] })
	// Hashing stops at the longest registered length: past it there is nothing to match
	// (on a first load, nothing is hashed at all; the load hashes what it reads).
	var hashUpTo int64
	if len(lens) > 0 {
		hashUpTo = lens[len(lens)-1]
	}
	h := sha256.New()
	check := func() {
		sum := hex.EncodeToString(h.Sum(nil))
		for _, p := range byLen[sc.size] {
			if p.sum == sum {
				sc.matched = p
			}
		}
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			// Cut the chunk at the next registered length, so the hash can be read there.
			take := int64(len(chunk))
			for len(lens) > 0 && lens[0] <= sc.size {
				lens = lens[1:]
			}
			if len(lens) > 0 && lens[0]-sc.size < take {
				take = lens[0] - sc.size
			}
			part := chunk[:take]
			if sc.size < hashUpTo { // parts end at every registered length, hashUpTo too
				h.Write(part)
			}
			sc.lines += int64(bytes.Count(part, []byte{'\n'}))
			if i := bytes.LastIndexByte(part, '\n'); i >= 0 {
				sc.end = sc.size + int64(i) + 1
			}
			sc.size += take
			chunk = chunk[take:]
			if _, ok := byLen[sc.size]; ok {
				check()
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil && in.gz != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)) {
			sc.truncated, sc.broken = true, err
			break
		}
		if err != nil {
			return sc, err
		}
	}
	return sc, nil
}

// detectLines is how many non-blank lines format detection looks at.
const detectLines = 20

// ErrUnknownFormat means no preset matches the start of a file.
var ErrUnknownFormat = parse.ErrUnknownFormat

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

// Detect picks the preset that parses most of the first lines of r (parse.Detect)
// without consuming them.
func Detect(r *bufio.Reader) (*parse.Format, error) { return parse.Detect(firstLines(r, detectLines)) }

// rotated splits a log file name into its base and rotation suffix: access.log.1 and
// access.log.2.gz (logrotate's numbers: higher is older), access.log-20261129[.gz]
// (dateext: earlier is older).
var rotated = regexp.MustCompile(`^(.*?)(?:\.(\d{1,6})|-(\d{8,10}))?(?:\.gz)?$`)

// Inputs expands the FILE arguments: a name that does not exist but holds a glob
// pattern ('/var/log/nginx/access.log*', quoted so that the shell left it alone) is
// replaced by the files it matches, and every rotated set (access.log access.log.1
// access.log.2.gz) is put oldest first, where its first appearance was. "-" is stdin.
func Inputs(args []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, a := range args {
		matches := []string{a}
		if _, err := os.Stat(a); err != nil && a != "-" && strings.ContainsAny(a, "*?[") {
			m, gerr := filepath.Glob(a)
			if gerr != nil {
				return nil, fmt.Errorf("%s: %w", a, gerr)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: no file matches", a)
			}
			matches = m
		}
		for _, m := range matches {
			if !seen[m] || m == "-" {
				seen[m] = true
				files = append(files, m)
			}
		}
	}
	// Sets keep the place of their first file; within a set, oldest first.
	var order []string
	sets := map[string][]string{}
	for k, f := range files {
		base := rotated.FindStringSubmatch(f)[1]
		if f == "-" {
			base = "-" + strconv.Itoa(k) // stdin is a set of its own
		}
		if _, ok := sets[base]; !ok {
			order = append(order, base)
		}
		sets[base] = append(sets[base], f)
	}
	files = files[:0]
	for _, base := range order {
		set := sets[base]
		sort.SliceStable(set, func(i, j int) bool { return rotation(set[i]) > rotation(set[j]) })
		files = append(files, set...)
	}
	return files, nil
}

// rotation is how old a file of a rotated set is: 0 for the live file, higher older.
func rotation(name string) int {
	m := rotated.FindStringSubmatch(name)
	if m[3] != "" {
		d, _ := strconv.Atoi(m[3])
		return 1e11 - d
	}
	n, _ := strconv.Atoi(m[2])
	return n
}
