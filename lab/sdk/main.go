// Command sdkclient drives real SDKs through a gateway for the lab (docs/lab.md, "Real
// SDKs"): aws-sdk-go-v2 (DynamoDB GetItem and PutItem, S3 GetObject and PutObject, with its
// standard retryer) or openai-go (a Stainless client: chat completions and the model list),
// each with its own defaults but a per-attempt timeout. Every HTTP attempt the SDK makes is
// recorded, as JSON lines on -out: the client's own record, the lab's truth.
//
// It is a module of its own so that the SDKs stay out of retrylens's go.mod.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Attempt is one HTTP attempt as the client made it.
type Attempt struct {
	SDK          string `json:"sdk"`
	Call         string `json:"call"` // the logical call, named by the lab
	Op           string `json:"op"`
	N            int    `json:"n"` // 0 for the call's first attempt
	Sent         int64  `json:"sent"`
	End          int64  `json:"end"`    // unix ns
	Status       int    `json:"status"` // 0: no answer (a timeout)
	RetryAfterMs int    `json:"retry_after_ms,omitempty"`
	Invocation   string `json:"invocation,omitempty"` // amz-sdk-invocation-id as sent
}

type callKey struct{}

type callInfo struct{ sdk, id, op string }

// recorder records every attempt that goes through it.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
	out  *json.Encoder
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(callKey{}).(callInfo)
	r.mu.Lock()
	n := r.n[c.id]
	r.n[c.id]++
	r.mu.Unlock()
	a := Attempt{SDK: c.sdk, Call: c.id, Op: c.op, N: n, Sent: time.Now().UnixNano(), Invocation: req.Header.Get("Amz-Sdk-Invocation-Id")}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		a.Status = resp.StatusCode
		a.RetryAfterMs, _ = strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
		// the body is read whole here, so that a timeout while reading it is this attempt's
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			a.Status, err, resp = 0, rerr, nil
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	a.End = time.Now().UnixNano()
	r.mu.Lock()
	r.out.Encode(a)
	r.mu.Unlock()
	return resp, err
}

func main() {
	base := flag.String("base", "", "the gateway's URL")
	sdk := flag.String("sdk", "aws", "aws or openai")
	dur := flag.Duration("for", 10*time.Second, "how long to make calls")
	workers := flag.Int("workers", 4, "calls at once")
	timeout := flag.Duration("timeout", time.Second, "each attempt's timeout")
	out := flag.String("out", "", "where the attempts go, as JSON lines")
	name := flag.String("name", "", "what the calls' ids start with (default: -sdk)")
	quota := flag.Uint("quota", 0, "aws: the standard retryer's retry quota in tokens (0: the SDK's own, 500)")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	rec := &recorder{next: http.DefaultTransport, n: map[string]int{}, out: json.NewEncoder(f)}
	hc := &http.Client{Transport: rec, Timeout: *timeout}
	var call func(ctx context.Context, i int) (string, error)
	if *name == "" {
		*name = *sdk
	}
	switch *sdk {
	case "aws":
		call = awsCalls(*base, *name, hc, *quota)
	case "openai":
		call = openaiCalls(*base, *name, hc, *timeout)
	default:
		log.Fatalf("-sdk %q: want aws or openai", *sdk)
	}
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	var next int
	var mu sync.Mutex
	for range *workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				call(context.Background(), i) // the record says how it went
			}
		})
	}
	wg.Wait()
}

// awsCalls are DynamoDB GetItem, PutItem, S3 GetObject and PutObject in turn, with the
// standard retryer; a quota other than 0 is its retry quota's size (each retry spends 14
// tokens, 5 after a throttle; a first-attempt success earns one back): a small one runs
// out, and the SDK then returns a failure it would retry without retrying it.
func awsCalls(base, name string, hc *http.Client, quota uint) func(context.Context, int) (string, error) {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDLAB", "secret", ""),
		HTTPClient: hc, BaseEndpoint: aws.String(base),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired}
	if quota > 0 {
		cfg.Retryer = func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.NewTokenRateLimit(quota) })
		}
	}
	ddb := dynamodb.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	return func(ctx context.Context, i int) (string, error) {
		id := fmt.Sprintf("%s-%05d", name, i)
		key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
		ops := []string{"GetItem", "PutItem", "GetObject", "PutObject"}
		op := ops[i%len(ops)]
		ctx = context.WithValue(ctx, callKey{}, callInfo{"aws-sdk-go-v2", id, op})
		var err error
		switch op {
		case "GetItem":
			_, err = ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("lab"), Key: key})
		case "PutItem":
			_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("lab"), Item: key})
		case "GetObject":
			var o *s3.GetObjectOutput
			if o, err = s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lab"), Key: aws.String(id)}); err == nil {
				io.Copy(io.Discard, o.Body)
				o.Body.Close()
			}
		case "PutObject":
			_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lab"), Key: aws.String(id), Body: bytes.NewReader([]byte("hello"))})
		}
		return op, err
	}
}

// openaiCalls are chat completions and the model list in turn, each call naming itself in
// the completion's user field (the upstream counts its writes by it).
func openaiCalls(base, name string, hc *http.Client, timeout time.Duration) func(context.Context, int) (string, error) {
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("lab"), option.WithHTTPClient(hc),
		option.WithRequestTimeout(timeout))
	return func(ctx context.Context, i int) (string, error) {
		id := fmt.Sprintf("%s-%05d", name, i)
		if i%2 == 1 {
			ctx = context.WithValue(ctx, callKey{}, callInfo{"openai-go", id, "models"})
			_, err := client.Models.List(ctx)
			return "models", err
		}
		ctx = context.WithValue(ctx, callKey{}, callInfo{"openai-go", id, "chat"})
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "lab-1", User: openai.String(id),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return "chat", err
	}
}
