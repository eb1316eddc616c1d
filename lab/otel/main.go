// Command otelclient is the lab's traced client (its own module, so that grpc-go and the
// OpenTelemetry SDK stay out of retrylens's): grpc-go with a retry policy and its
// OpenTelemetry tracing (gRFC A72), whose spans the SDK's own OTLP/HTTP exporter sends
// to a receiver here that writes them as OTLP JSON, one request a line, as the
// Collector's file exporter does. The server is grpc-go's health service, failing each
// call's first attempts with UNAVAILABLE as the call asks; it counts the attempts it
// answered per call, which with the client's final status per call is the truth it
// prints as JSON lines. With -fail-rate the server fails each attempt with that
// probability instead, drawn from the call and the attempt's number (the same draw in
// every run), and -throttle gives the client gRPC's retryThrottling.
//
//	otelclient -calls 60 -out traces.json > truth.jsonl
//	otelclient -calls 600 -fail-rate 0.4 -throttle 10,0.1 -out traces.json > truth.jsonl
//	otelclient -listen 127.0.0.1:9001 -target 127.0.0.1:8080 …   # through a gateway
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental/opentelemetry"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcotel "google.golang.org/grpc/stats/opentelemetry"
	"google.golang.org/grpc/status"
)

// maxAttempts is the client's retry policy's cap, the first attempt included.
const maxAttempts = 4

// Call is one call's truth: the attempts the server answered and how the call ended.
type Call struct {
	Call     int    `json:"call"`
	Fail     int    `json:"fail"` // attempts the server was asked to fail
	Attempts int    `json:"attempts"`
	Code     string `json:"code"`
}

// health fails a call's attempts before its "fail:N" (the Check request's service), or,
// with a failRate, each attempt with that probability.
type health struct {
	grpc_health_v1.UnimplementedHealthServer
	mu       sync.Mutex
	attempts map[string]int
	failRate float64
}

// draw is a share in [0, 1) drawn from a call and an attempt's number.
func draw(call string, n int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", call, n)
	return float64(h.Sum64()%10000) / 10000
}

func (h *health) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	call := ""
	if v := md.Get("call-id"); len(v) > 0 {
		call = v[0]
	}
	h.mu.Lock()
	h.attempts[call]++
	n := h.attempts[call]
	h.mu.Unlock()
	if h.failRate > 0 {
		if draw(call, n) < h.failRate {
			return nil, status.Error(codes.Unavailable, "overloaded")
		}
		return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
	}
	var fail int
	fmt.Sscanf(req.GetService(), "fail:%d", &fail)
	if n <= fail {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func main() {
	calls := flag.Int("calls", 60, "calls to make; call i asks the server to fail its first i%6 attempts")
	out := flag.String("out", "traces.json", "where the receiver writes the OTLP JSON")
	listen := flag.String("listen", "127.0.0.1:0", "the server's address")
	target := flag.String("target", "", "the address the client calls, a gateway in front of the server (default: the server)")
	failRate := flag.Float64("fail-rate", 0, "fail each attempt with this probability instead (UNAVAILABLE)")
	throttle := flag.String("throttle", "", "the client's retryThrottling: maxTokens,tokenRatio (default: none)")
	flag.Parse()
	if err := run(*calls, *out, *listen, *target, *failRate, *throttle); err != nil {
		log.Fatal(err)
	}
}

func run(calls int, out, listen, target string, failRate float64, throttle string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	recv, err := receive(f)
	if err != nil {
		return err
	}
	defer recv.Close()

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if target == "" {
		target = lis.Addr().String()
	}
	h := &health{attempts: map[string]int{}, failRate: failRate}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, h)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(recv.Addr), otlptracehttp.WithInsecure())
	if err != nil {
		return err
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("otelclient"), semconv.ServiceVersion("1.0"), semconv.HostName("lab-client")))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	throttling := ""
	if throttle != "" {
		tokens, ratio, _ := strings.Cut(throttle, ",")
		throttling = fmt.Sprintf(`,"retryThrottling":{"maxTokens":%s,"tokenRatio":%s}`, tokens, ratio)
	}
	retry := fmt.Sprintf(`{"methodConfig":[{"name":[{"service":"grpc.health.v1.Health"}],"retryPolicy":{
		"maxAttempts":%d,"initialBackoff":"0.01s","maxBackoff":"0.05s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]%s}`,
		maxAttempts, throttling)
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(retry),
		grpcotel.DialOption(grpcotel.Options{TraceOptions: opentelemetry.TraceOptions{
			TracerProvider: tp, TextMapPropagator: propagation.TraceContext{}}}))
	if err != nil {
		return err
	}
	client := grpc_health_v1.NewHealthClient(cc)
	enc := json.NewEncoder(os.Stdout)
	var truth []Call
	for i := range calls {
		fail := i % 6
		cctx := metadata.AppendToOutgoingContext(ctx, "call-id", strconv.Itoa(i))
		_, err := client.Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: fmt.Sprintf("fail:%d", fail)})
		truth = append(truth, Call{Call: i, Fail: fail, Code: status.Code(err).String()})
	}
	cc.Close()
	if err := tp.Shutdown(ctx); err != nil { // exports every span before it returns
		return err
	}
	for _, c := range truth {
		h.mu.Lock()
		c.Attempts = h.attempts[strconv.Itoa(c.Call)]
		h.mu.Unlock()
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return recv.err()
}

// receiver takes OTLP/HTTP trace exports and writes each as a line of OTLP JSON.
type receiver struct {
	Addr string
	srv  *http.Server
	mu   sync.Mutex
	w    io.Writer
	errs []error
}

func receive(w io.Writer) (*receiver, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{Addr: lis.Addr().String(), w: w}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go r.srv.Serve(lis)
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var b []byte
	if err == nil {
		er := ptraceotlp.NewExportRequest()
		if err = er.UnmarshalProto(body); err == nil {
			var m ptrace.JSONMarshaler
			b, err = m.MarshalTraces(er.Traces())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	if err != nil {
		r.errs = append(r.errs, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Write(resp)
}

func (r *receiver) Close() error { return r.srv.Close() }

func (r *receiver) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		return fmt.Errorf("the receiver: %v", r.errs[0])
	}
	return nil
}
