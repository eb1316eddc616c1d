package parse

import (
	"strings"
	"time"
	"unsafe"
)

// ParseLine parses one line (without or with its trailing newline). It allocates one
// string for the line; the Record's strings share it unless a value had to be unescaped.
// A line that does not match returns a zero Record and an *Error with Line 0.
func (f *Format) ParseLine(line []byte) (Record, error) {
	var r Record
	if err := f.parse(&r, string(line)); err != nil {
		return Record{}, err
	}
	return r, nil
}

// ParseBytes parses a line Reader.Next returned into rec, without a copy: rec's strings
// point into line, which must never change. A line that does not match leaves rec zero
// and returns an *Error with Line 0.
func (f *Format) ParseBytes(rec *Record, line []byte) *Error {
	if len(line) == 0 {
		*rec = Record{}
		return errAt(0, ErrEmptyLine, "")
	}
	if perr := f.parse(rec, unsafe.String(&line[0], len(line))); perr != nil {
		*rec = Record{}
		return perr
	}
	return nil
}

func (f *Format) parse(r *Record, s string) *Error {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	r.reset()
	if len(s) == 0 || s[0] <= ' ' && strings.TrimSpace(s) == "" {
		return errAt(0, ErrEmptyLine, "")
	}
	var st state
	if err := f.dialect.parse(f, r, &st, s); err != nil {
		return err
	}
	if st.timeLocal != "" {
		// A better time ($msec, $time_iso8601) wins; $time_local must still look right.
		var t time.Time
		ok := (st.haveMsec || st.haveISO) && timeLocalShape(st.timeLocal)
		if !ok {
			t, ok = parseTimeLocal(st.timeLocal)
		}
		if !ok {
			hint := ""
			if _, iso := parseTimeISO(st.timeLocal); iso {
				hint = ": this looks like $time_iso8601, put that in the format instead"
			}
			return errAt(st.timeLocalPos, ErrBadTime, "want $time_local like 10/Oct/2026:13:55:36 +0000, found %s%s", excerpt(st.timeLocal, 0, 32), hint)
		}
		if !st.haveMsec && !st.haveISO {
			r.Time = t
		}
	}
	finish(r, &st, f)
	return nil
}
