package traces

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrylens/retrylens/parse"
)

// Every line Convert writes is a JSON object the otel preset reads, or rejects saying
// why; and the lines of a file's first documents start the lines of the whole
// (what lets ingest load only what a growing file added).
func FuzzConvert(f *testing.F) {
	b, err := os.ReadFile("../testdata/otel/traces.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	j, err := os.ReadFile("../testdata/otel/jaeger.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(j)
	f.Add([]byte(`{"data":[{"spans":[{"traceID":"1","spanID":"2","startTime":1,"duration":-5,"tags":[{"key":"span.kind","type":"string","value":"client"},{"key":"http.request.method","type":"string","value":"GET"},{"key":"http.request.resend_count","type":"int64","value":"x"}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[]}` + "\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":"02","kind":3}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":3,"attributes":[{"key":"http.request.method","value":{"stringValue":"GET"}},{"key":"url.full","value":{"stringValue":"http://a/%zz"}}]}]}]}]}`))
	otel, err := parse.Preset("otel")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var all bytes.Buffer
		if _, err := Convert(bytes.NewReader(in), &all); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(all.Bytes()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			// a span's own values can be beyond what a log line may hold (a start before
			// 1970): the preset rejects those lines, each with its reason
			var obj map[string]any
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				t.Fatalf("not a JSON object: %v: %s", err, sc.Bytes())
			}
			if _, err := otel.ParseLine(sc.Bytes()); err != nil && err.Error() == "" {
				t.Fatalf("rejected without a reason: %s", sc.Bytes())
			}
		}
		// the first documents' lines start the whole's
		docs := strings.SplitAfter(string(in), "\n")
		if len(docs) > 1 {
			var part bytes.Buffer
			if _, err := Convert(strings.NewReader(strings.Join(docs[:len(docs)/2], "")), &part); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(all.Bytes(), part.Bytes()) && !bytes.Contains(part.Bytes(), []byte(`"otlp_error"`)) {
				t.Fatalf("the lines of the first %d documents do not start the whole's:\n%s\n---\n%s", len(docs)/2, part.Bytes(), all.Bytes())
			}
		}
	})
}

// A file of documents one a line and spread over lines, a line that is not JSON, a
// document that never closes before the next starts, and one cut short at the end (still
// being written): the good documents' spans, a rejected line for each bad one naming its
// lines, and nothing yet for the last.
func TestConvertDocuments(t *testing.T) {
	b, err := os.ReadFile("testdata/mixed.json")
	if err != nil {
		t.Fatal(err)
	}
	// mixed.json, and an unclosed document before its third line
	lines := strings.SplitAfter(string(b), "\n")
	unclosed := strings.Join(lines[:2], "") + `{"resourceSpans":[` + "\n" + strings.Join(lines[2:], "")
	for _, c := range []struct {
		in         string
		want       []string // each line: an attempt's x_retry_attempt, or the rejection
		unfinished int      // the line the last document, unfinished, starts at
	}{
		{string(b), []string{"not trace JSON (line 2): not one JSON object", "0", "1"}, 8},
		{unclosed, []string{"not trace JSON (line 2): not one JSON object", "not trace JSON (line 3): cut short", "0", "1"}, 9},
		{strings.Join(lines[:7], ""), []string{"not trace JSON (line 2): not one JSON object", "0", "1"}, 0},
	} {
		var out bytes.Buffer
		st, err := Convert(strings.NewReader(c.in), &out)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var v struct {
				Error   string `json:"otlp_error"`
				Attempt *int   `json:"x_retry_attempt"`
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatal(err)
			}
			if v.Attempt != nil {
				got = append(got, strconv.Itoa(*v.Attempt))
			} else {
				got = append(got, v.Error)
			}
		}
		if !slices.Equal(got, c.want) || st.Attempts != 2 || st.Unfinished != c.unfinished {
			t.Errorf("lines %q (%+v), want %q, the unfinished document at line %d", got, st, c.want, c.unfinished)
		}
	}
}

// A gRPC attempt span's name gives the method's HTTP/2 path, as C++ and Java write it and
// as grpc-go does, with a dot for the slash.
func TestGRPCPath(t *testing.T) {
	for name, want := range map[string]string{
		"shop.Orders/Get":                   "/shop.Orders/Get",
		"grpc.health.v1.Health.Check":       "/grpc.health.v1.Health/Check",
		"grpc.testing.EchoTestService/Echo": "/grpc.testing.EchoTestService/Echo",
		"Check":                             "/Check",
	} {
		if got := grpcPath(name); got != want {
			t.Errorf("grpcPath(%q) = %q, want %q", name, got, want)
		}
	}
}
