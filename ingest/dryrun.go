package ingest

import (
	"bufio"
	"io"

	"github.com/retrylens/retrylens/parse"
	"github.com/retrylens/retrylens/traces"
)

// Sample is how one of a file's first lines parses.
type Sample struct {
	Line   int
	Raw    string
	Record parse.Record
	Err    error // a *parse.Error when the line does not match
}

// DryRun parses the first n lines of a file (or stdin for "-") without loading anything,
// in format f, or the detected format when f is nil.
func DryRun(path string, stdin io.Reader, f *parse.Format, n int) (*parse.Format, []Sample, error) {
	in, err := openInput(path, stdin)
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	src := io.Reader(in.r)
	if b, _ := in.r.Peek(64); traces.IsTraces(b) {
		// the attempt lines ingest would write from the traces, as they come
		pr, pw := io.Pipe()
		defer pr.Close()
		go func() { _, err := traces.Convert(in.r, pw); pw.CloseWithError(err) }()
		src = pr
		if f, err = parse.Preset("otel"); err != nil {
			return nil, nil, err
		}
	}
	br := bufio.NewReaderSize(src, 256<<10)
	if f == nil {
		if f, err = Detect(br); err != nil {
			return nil, nil, err
		}
	}
	r := parse.NewReader(br, f)
	var out []Sample
	for len(out) < n {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		s := Sample{Line: r.Line(), Raw: validUTF8(r.Excerpt(4096)), Record: rec}
		if err != nil {
			if _, ok := err.(*parse.Error); !ok {
				return f, out, err
			}
			s.Err = err
		}
		out = append(out, s)
	}
	return f, out, nil
}
