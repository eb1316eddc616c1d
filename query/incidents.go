package query

import (
	"context"
	"time"

	"github.com/retrylens/retrylens/judge"
)

// Incident is an incident window with the metrics of the same length of time before it,
// during it and after it.
type Incident struct {
	judge.Span
	Before, During, After judge.Metrics
}

// Compare computes an incident's before / during / after metrics from the Set's minutes:
// what a report over each stretch would say (a range equals its window of a report over
// more), but only of the Set's rows: a stretch outside its range counts nothing.
func (s *Set) Compare(ctx context.Context, span judge.Span) (Incident, error) {
	in := Incident{Span: span}
	bs, err := s.bucketsOf(ctx, minuteGrain)
	if err != nil {
		return in, err
	}
	d := span.End.Sub(span.Start)
	for _, part := range []struct {
		from, to time.Time
		m        *judge.Metrics
	}{{span.Start.Add(-d), span.Start, &in.Before}, {span.Start, span.End, &in.During}, {span.End, span.End.Add(d), &in.After}} {
		var c counts
		for _, b := range bs {
			if b.valid && !b.start.Before(part.from) && b.start.Before(part.to) {
				c.add(b.c)
			}
		}
		*part.m = c.metrics(s.rules)
	}
	return in, nil
}
