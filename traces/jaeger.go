package traces

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Jaeger's JSON (the UI's "Download JSON", its query API): {"data": [traces]}, each trace
// its spans (microseconds, tags, references) and the processes (services) that made
// them. It is turned into the OTLP model the rest of the package reads, with the names
// Jaeger's own OTLP translation gives: span.kind a tag, the service a process, the status
// the otel.status_code tag (or error=true).

// jaegerHead matches the start of a Jaeger JSON document.
var jaegerHead = regexp.MustCompile(`^\s*\{\s*"data"\s*:\s*\[`)

type jaegerDoc struct {
	Data []struct {
		Spans []struct {
			TraceID       string      `json:"traceID"`
			SpanID        string      `json:"spanID"`
			ParentSpanID  string      `json:"parentSpanID"`
			OperationName string      `json:"operationName"`
			References    []jaegerRef `json:"references"`
			StartTime     int64       `json:"startTime"`
			Duration      int64       `json:"duration"`
			Tags          []jaegerTag `json:"tags"`
			ProcessID     string      `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string      `json:"serviceName"`
			Tags        []jaegerTag `json:"tags"`
		} `json:"processes"`
	} `json:"data"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// fromJaeger reads a Jaeger JSON document as OTLP traces: a resource per process.
func fromJaeger(doc []byte) (ptrace.Traces, error) {
	var jd jaegerDoc
	td := ptrace.NewTraces()
	if err := json.Unmarshal(doc, &jd); err != nil {
		return td, err
	}
	for _, tr := range jd.Data {
		scopes := map[string]ptrace.SpanSlice{}
		for _, js := range tr.Spans {
			spans, ok := scopes[js.ProcessID]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				p := tr.Processes[js.ProcessID]
				rs.Resource().Attributes().PutStr("service.name", p.ServiceName)
				for _, t := range p.Tags {
					k := t.Key
					if k == "hostname" {
						k = "host.name"
					}
					putTag(rs.Resource().Attributes(), k, t)
				}
				spans = rs.ScopeSpans().AppendEmpty().Spans()
				scopes[js.ProcessID] = spans
			}
			sp := spans.AppendEmpty()
			var err error
			if sp, err = jaegerSpan(sp, js.TraceID, js.SpanID, js.ParentSpanID, js.References); err != nil {
				return td, err
			}
			sp.SetName(js.OperationName)
			sp.SetStartTimestamp(pcommon.Timestamp(js.StartTime * 1000))
			sp.SetEndTimestamp(pcommon.Timestamp((js.StartTime + js.Duration) * 1000))
			for _, t := range js.Tags {
				switch t.Key {
				case "span.kind":
					sp.SetKind(map[string]ptrace.SpanKind{"client": ptrace.SpanKindClient, "server": ptrace.SpanKindServer,
						"producer": ptrace.SpanKindProducer, "consumer": ptrace.SpanKindConsumer, "internal": ptrace.SpanKindInternal}[tagString(t)])
				case "otel.status_code":
					if strings.EqualFold(tagString(t), "ERROR") {
						sp.Status().SetCode(ptrace.StatusCodeError)
					} else if strings.EqualFold(tagString(t), "OK") {
						sp.Status().SetCode(ptrace.StatusCodeOk)
					}
				case "otel.status_description":
					sp.Status().SetMessage(tagString(t))
				case "error":
					if tagString(t) == "true" && sp.Status().Code() == ptrace.StatusCodeUnset {
						sp.Status().SetCode(ptrace.StatusCodeError)
					}
				default:
					putTag(sp.Attributes(), t.Key, t)
				}
			}
		}
	}
	return td, nil
}

// jaegerSpan sets the ids of sp: Jaeger writes them as hex, a trace id of 64 bits as 16
// digits; the parent is parentSpanID, or the CHILD_OF reference.
func jaegerSpan(sp ptrace.Span, trace, span, parent string, refs []jaegerRef) (ptrace.Span, error) {
	var tid pcommon.TraceID
	var sid, pid pcommon.SpanID
	if err := hexInto(tid[:], trace); err != nil {
		return sp, fmt.Errorf("traceID %q: %w", trace, err)
	}
	if err := hexInto(sid[:], span); err != nil {
		return sp, fmt.Errorf("spanID %q: %w", span, err)
	}
	for _, r := range refs {
		if r.RefType == "CHILD_OF" && parent == "" {
			parent = r.SpanID
		}
	}
	if parent != "" {
		if err := hexInto(pid[:], parent); err != nil {
			return sp, fmt.Errorf("parent %q: %w", parent, err)
		}
	}
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetParentSpanID(pid)
	return sp, nil
}

// hexInto decodes s into the end of b, left-padded with zeros.
func hexInto(b []byte, s string) error {
	if len(s)%2 == 1 {
		s = "0" + s
	}
	d, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	if len(d) > len(b) {
		return fmt.Errorf("longer than %d bytes", len(b))
	}
	copy(b[len(b)-len(d):], d)
	return nil
}

func tagString(t jaegerTag) string {
	var s string
	if json.Unmarshal(t.Value, &s) == nil {
		return s
	}
	return string(t.Value)
}

func putTag(m pcommon.Map, k string, t jaegerTag) {
	switch t.Type {
	case "int64":
		if n, err := strconv.ParseInt(strings.Trim(string(t.Value), `"`), 10, 64); err == nil {
			m.PutInt(k, n)
			return
		}
	case "float64":
		if f, err := strconv.ParseFloat(strings.Trim(string(t.Value), `"`), 64); err == nil {
			m.PutDouble(k, f)
			return
		}
	case "bool":
		m.PutBool(k, tagString(t) == "true")
		return
	}
	m.PutStr(k, tagString(t))
}
