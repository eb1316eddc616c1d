package parse

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel causes wrapped by Error, for errors.Is.
var (
	ErrLiteral     = errors.New("literal text not found")
	ErrTrailing    = errors.New("unexpected text after the last field")
	ErrBadStatus   = errors.New("bad status")
	ErrBadTime     = errors.New("bad time")
	ErrBadNumber   = errors.New("bad number")
	ErrBadJSON     = errors.New("bad JSON")
	ErrEmptyLine   = errors.New("empty line")
	ErrLineTooLong = errors.New("line too long")
)

// Error is a line that does not match its Format. Line is 1-based and 0 when the error
// comes from ParseLine; Column is the 1-based byte offset where matching failed.
type Error struct {
	Line   int
	Column int
	Err    error  // one of the sentinels above
	Detail string // what was expected and what was found, short
	Head   []byte // a line too long to keep (ErrLineTooLong): its first HeadLength bytes
}

// HeadLength is how much of a line too long to keep an Error holds (Head), for the
// sample of rejected lines.
const HeadLength = 160

func (e *Error) Error() string {
	s := ""
	if e.Line > 0 {
		s = "line " + strconv.Itoa(e.Line) + ", "
	}
	s += "column " + strconv.Itoa(e.Column) + ": " + e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Reason is a short stable name for the cause, used to count rejects.
func (e *Error) Reason() string {
	switch e.Err {
	case ErrLiteral:
		return "literal"
	case ErrTrailing:
		return "trailing"
	case ErrBadStatus:
		return "status"
	case ErrBadTime:
		return "time"
	case ErrBadNumber:
		return "number"
	case ErrBadJSON:
		return "json"
	case ErrEmptyLine:
		return "empty"
	case ErrLineTooLong:
		return "too_long"
	}
	return "other"
}

func errAt(col int, err error, format string, args ...any) *Error {
	return &Error{Column: col + 1, Err: err, Detail: fmt.Sprintf(format, args...)}
}

// excerpt returns at most n bytes of s from i, quoted, for messages.
func excerpt(s string, i, n int) string {
	if i > len(s) {
		i = len(s)
	}
	e := s[i:]
	if len(e) > n {
		e = e[:n] + "…"
	}
	return strconv.Quote(e)
}
