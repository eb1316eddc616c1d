package budget

import (
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrylens/retrylens/query"
	"github.com/retrylens/retrylens/sdk"
)

// Fleet replays the attempts through one model per instance and adds the results up: a
// retry budget is kept by each client (a Finagle or gRPC client, an SDK's client, an
// Envoy sidecar), so its floors (the retries a second or in flight it always allows, its
// tokens) hold per instance, and a fleet of N has N of them. With instances 0 each client
// address the log shows is one instance; with n > 0 the logical requests are spread over
// n instances by their key (a log whose clients are a load balancer's few addresses). A
// request stays with the instance of its first attempt in the log. It returns the sum and
// the number of instances.
func Fleet(attempts []query.Attempt, newModel func() Model, instances int) (Result, int) {
	f := newFleet(attempts, instances)
	return f.replay(newModel), f.n
}

// fleet is the attempts split into instances, each with its requests numbered: split once,
// replayed through every setting.
type fleet struct {
	parts [][]query.Attempt
	ids   [][]int32
	keys  []int
	n     int
	// unnamed are the logical requests whose lines name no client (the log has no
	// client address): by client, they make one instance, which the log cannot tell
	unnamed int
}

func newFleet(attempts []query.Attempt, instances int) *fleet {
	of := map[string]string{} // a request's instance
	parts := map[string][]query.Attempt{}
	var order []string
	var unnamed int
	for _, a := range attempts {
		in, ok := of[a.Key]
		if !ok {
			in = a.Client
			if in == "" && instances == 0 {
				unnamed++
			}
			if instances > 0 {
				h := fnv.New32a()
				h.Write([]byte(a.Key))
				in = strconv.Itoa(int(h.Sum32() % uint32(instances)))
			}
			of[a.Key] = in
		}
		if _, seen := parts[in]; !seen {
			order = append(order, in)
		}
		parts[in] = append(parts[in], a)
	}
	f := &fleet{n: len(order), unnamed: unnamed}
	if instances > 0 {
		f.n = instances
	}
	for _, in := range order {
		ids, n := keyIDs(parts[in])
		f.parts, f.ids, f.keys = append(f.parts, parts[in]), append(f.ids, ids), append(f.keys, n)
	}
	return f
}

// replay replays every instance through a model of its own and adds the results up.
func (f *fleet) replay(newModel func() Model) Result {
	var sum Result
	for i, part := range f.parts {
		r := replay(part, f.ids[i], f.keys[i], newModel(), 0)
		sum.Model = r.Model
		sum.FirstAttempts += r.FirstAttempts
		sum.Retries += r.Retries
		sum.Allowed += r.Allowed
		sum.Denied += r.Denied
		sum.Recovered += r.Recovered
		sum.LostRecoveries += r.LostRecoveries
	}
	if sum.FirstAttempts > 0 {
		sum.Amplification = float64(sum.FirstAttempts+sum.Retries) / float64(sum.FirstAttempts)
		sum.AmplificationAfter = float64(sum.FirstAttempts+sum.Allowed) / float64(sum.FirstAttempts)
	}
	return sum
}

// Knob is one setting of a family, in the system's own name and unit.
type Knob struct{ Name, Value string }

// Setting is one point of a family's grid: its knobs, and the model that replays one
// instance of it.
type Setting struct {
	Knobs []Knob
	New   func() Model
	// floor is what the setting always allows an instance (retries a second, retries in
	// flight), with its unit; 0 for none
	floor     float64
	floorUnit string
}

// Family is a retry budget people set: the settings Advise tries, how its users write one
// (Config), and whether each client keeps its own (PerClient) or one gateway keeps it for
// every client (the Gateway API's, per gateway replica).
type Family struct {
	Name      string // as --family and JSON name it
	System    string // for a person
	PerClient bool
	Settings  []Setting
	Config    func(Setting) string
	// ByCode says that a retry's cost depends on the error code of the answer before it
	// (a throttle's is less): retries after an answer whose code the log lacks are
	// costed as transient, and counted (Advice.Uncoded)
	ByCode bool
}

func knob(s Setting, name string) string {
	for _, k := range s.Knobs {
		if k.Name == name {
			return k.Value
		}
	}
	return ""
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// ratioSettings are the grid of a ratio budget (Finagle, Linkerd, the Gateway API):
// retries as a share of requests over a window, and a floor a second.
func ratioSettings(label string, names [3]string, pct bool) []Setting {
	var out []Setting
	for _, ratio := range []float64{0.01, 0.05, 0.1, 0.2, 0.5, 1} {
		for _, floor := range []float64{0, 1, 5, 10} {
			r, f := ratio, floor
			v := num(r)
			if pct {
				v = num(r * 100)
			}
			out = append(out, Setting{
				Knobs: []Knob{{names[0], v}, {names[1], num(f)}, {names[2], "10s"}},
				New:   func() Model { return &Ratio{Label: label, Ratio: r, MinPerSec: f, TTL: 10 * time.Second} },
				floor: f, floorUnit: "retries a second",
			})
		}
	}
	return out
}

// awsSettings are the AWS SDKs' retry quota sizes, with a retry's costs.
func awsSettings(label string, cost, timeoutCost, throttleCost float64) []Setting {
	var out []Setting
	for _, quota := range []float64{10, 25, 50, 100, 250, 500, 1000} {
		q := quota
		out = append(out, Setting{Knobs: []Knob{{"retry quota (tokens)", num(q)}},
			New: func() Model {
				return &AWS{Label: label, Quota: q, Cost: cost, TimeoutCost: timeoutCost, ThrottleCost: throttleCost}
			}})
	}
	return out
}

// Families are the retry budgets Advise sizes, each in its own words and units.
var Families = []Family{
	{Name: "envoy", System: "Envoy retry budget (cluster circuit breakers)", PerClient: true,
		Settings: func() []Setting {
			var out []Setting
			for _, pct := range []float64{5, 10, 20, 25, 50, 100} {
				for _, min := range []int{0, 1, 3, 10} {
					p, m := pct, min
					out = append(out, Setting{Knobs: []Knob{{"budget_percent", num(p)}, {"min_retry_concurrency", strconv.Itoa(m)}},
						New:   func() Model { return &Envoy{Percent: p / 100, MinConcurrent: m} },
						floor: float64(m), floorUnit: "retries in flight"})
				}
			}
			return out
		}(),
		Config: func(s Setting) string {
			return "circuit_breakers:\n  thresholds:\n  - priority: DEFAULT\n    retry_budget:\n      budget_percent: {value: " +
				knob(s, "budget_percent") + "}\n      min_retry_concurrency: " + knob(s, "min_retry_concurrency")
		}},
	{Name: "linkerd", System: "Linkerd ServiceProfile retryBudget", PerClient: true,
		Settings: ratioSettings("linkerd2", [3]string{"retryRatio", "minRetriesPerSecond", "ttl"}, false),
		Config: func(s Setting) string {
			return "spec:\n  retryBudget:\n    retryRatio: " + knob(s, "retryRatio") + "\n    minRetriesPerSecond: " +
				knob(s, "minRetriesPerSecond") + "\n    ttl: " + knob(s, "ttl")
		}},
	{Name: "finagle", System: "Finagle RetryBudget", PerClient: true,
		Settings: ratioSettings("finagle", [3]string{"percentCanRetry", "minRetriesPerSec", "ttl"}, false),
		Config: func(s Setting) string {
			return "RetryBudget(ttl = " + strings.TrimSuffix(knob(s, "ttl"), "s") + ".seconds, minRetriesPerSec = " +
				knob(s, "minRetriesPerSec") + ", percentCanRetry = " + knob(s, "percentCanRetry") + ")"
		}},
	{Name: "grpc", System: "gRPC retryThrottling (service config)", PerClient: true,
		Settings: func() []Setting {
			var out []Setting
			for _, tokens := range []float64{2, 5, 10, 20, 50, 100} {
				for _, ratio := range []float64{0.01, 0.05, 0.1, 0.5, 1} {
					t, r := tokens, ratio
					out = append(out, Setting{Knobs: []Knob{{"maxTokens", num(t)}, {"tokenRatio", num(r)}},
						New: func() Model { return &GRPC{MaxTokens: t, TokenRatio: r} }})
				}
			}
			return out
		}(),
		Config: func(s Setting) string {
			return `"retryThrottling": {"maxTokens": ` + knob(s, "maxTokens") + `, "tokenRatio": ` + knob(s, "tokenRatio") + `}`
		}},
	{Name: "aws", System: "AWS SDKs' retry quota, before the 2026 defaults (a retry 5 tokens, after a timeout 10)", PerClient: true,
		Settings: awsSettings("aws-standard", 5, 10, 5), Config: awsConfig},
	{Name: "aws-2026", System: "AWS SDKs' retry quota with the 2026 defaults (a retry 14 tokens, after a throttle 5)", PerClient: true,
		Settings: awsSettings("aws-2026", 14, 14, 5), Config: awsConfig, ByCode: true},
	{Name: "gateway-api", System: "Gateway API retry budget (GEP-3388, XBackendTrafficPolicy), per gateway replica",
		Settings: ratioSettings("gateway-api", [3]string{"budget.percent", "minRetryRate.count (per 1s)", "budget.interval"}, true),
		Config: func(s Setting) string {
			return "apiVersion: gateway.networking.x-k8s.io/v1alpha1\nkind: XBackendTrafficPolicy\nspec:\n  retryConstraint:\n    budget:\n      percent: " +
				knob(s, "budget.percent") + "\n      interval: " + knob(s, "budget.interval") + "\n    minRetryRate:\n      count: " +
				knob(s, "minRetryRate.count (per 1s)") + "\n      interval: 1s"
		}},
}

func awsConfig(s Setting) string {
	return "aws-sdk-go-v2: retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.NewTokenRateLimit(" +
		knob(s, "retry quota (tokens)") + ") })\nJava SDK 2.x: StandardRetryStrategy with a TokenBucket of " + knob(s, "retry quota (tokens)") + " tokens"
}

// FamilyNames are Families' names, in order.
func FamilyNames() []string {
	var out []string
	for _, f := range Families {
		out = append(out, f.Name)
	}
	return out
}

// Point is what one setting would have let through, replayed on every instance.
type Point struct {
	Setting       Setting
	Amplification float64 // attempts per first attempt, after the replay
	Lost          int     // recovered requests whose rescuing retry it would have denied
	Denied        int     // retries it would have denied
}

// Advice is a family's setting for a target: the one that meets it losing the fewest
// recovered requests (then denying the fewest retries), and every setting tried (the
// curve of amplification against recovered requests lost).
type Advice struct {
	Family        Family
	Best          *Point // nil when no setting meets the target
	Met           bool   // Best meets the target; else Best is the lowest amplification there is
	Curve         []Point
	Instances     int
	Amplification float64 // recorded
	Recovered     int     // recorded
	// Floor says what the best setting's per-instance floor adds up to across the
	// instances ("" when it has none)
	Floor string
	// Unnamed are the logical requests whose lines name no client, replayed as one
	// instance: how many instances sent them the log cannot tell (--instances can)
	Unnamed int
	// Uncoded are the retries, for a family that costs them by the code (ByCode), that
	// follow a 4xx whose code the log lacks: costed as transient, though a throttle
	// costs less (the field to log: x-amzn-ErrorType)
	Uncoded int
}

// uncodedRetries counts the retries that follow a 4xx whose error code the log lacks
// (sdk.AWS's CodeStatuses but 429, which the model costs as a throttle): whether it was
// a throttle, the log cannot tell.
func uncodedRetries(attempts []query.Attempt) int {
	codeStatuses := sdk.AWS().CodeStatuses
	last := map[string]*query.Attempt{}
	var n int
	for i := range attempts {
		a := &attempts[i]
		if p := last[a.Key]; a.N > 0 && p != nil && p.ErrorCode == "" && p.Status != 429 && slices.Contains(codeStatuses, p.Status) {
			n++
		}
		last[a.Key] = a
	}
	return n
}

// Target is what a setting must meet: an amplification at most Amplification (0: any),
// and at most MaxLost recovered requests lost (negative: any).
type Target struct {
	Amplification float64
	MaxLost       int
}

func (t Target) meets(p Point) bool {
	return (t.Amplification <= 0 || p.Amplification <= t.Amplification+1e-9) && (t.MaxLost < 0 || p.Lost <= t.MaxLost)
}

// Advise replays every setting of each family on the attempts, per instance (Fleet; the
// Gateway API's as one gateway), and picks, of those that meet the target, the one losing
// the fewest recoveries, or, when the target is only the recoveries one accepts to lose,
// the one with the lowest amplification.
//
// The replay is open loop: the recorded answers stay as they were, though fewer retries
// would also have meant fewer failures under overload. A setting is therefore judged on
// an upper bound of what it lets through, and on a count of recoveries it would have lost
// that the lighter load could have made up.
func Advise(attempts []query.Attempt, families []Family, target Target, instances int) []Advice {
	fleets := map[int]*fleet{} // by instances: the split is the same for every setting
	uncoded := -1
	var out []Advice
	for _, f := range families {
		a := Advice{Family: f}
		n := instances
		if !f.PerClient {
			n = 1
		}
		if fleets[n] == nil {
			fleets[n] = newFleet(attempts, n)
		}
		fl := fleets[n]
		// the settings replay at once, a core each: the attempts are only read
		results := make([]Result, len(f.Settings))
		var wg sync.WaitGroup
		work := make(chan int)
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for i := range work {
					results[i] = fl.replay(f.Settings[i].New)
				}
			})
		}
		for i := range f.Settings {
			work <- i
		}
		close(work)
		wg.Wait()
		a.Unnamed = fl.unnamed
		if f.ByCode {
			if uncoded < 0 {
				uncoded = uncodedRetries(attempts)
			}
			a.Uncoded = uncoded
		}
		for i, r := range results {
			a.Instances, a.Amplification, a.Recovered = fl.n, r.Amplification, r.Recovered
			a.Curve = append(a.Curve, Point{Setting: f.Settings[i], Amplification: r.AmplificationAfter, Lost: r.LostRecoveries, Denied: r.Denied})
		}
		var meets []Point
		for _, p := range a.Curve {
			if target.meets(p) {
				meets = append(meets, p)
			}
		}
		pick := func(ps []Point, less func(a, b Point) int) *Point {
			if len(ps) == 0 {
				return nil
			}
			best := slices.MinFunc(ps, less)
			return &best
		}
		// with an amplification to meet, the fewest recoveries lost (then retries denied);
		// with only the recoveries one accepts to lose, or when nothing meets the target,
		// the lowest amplification
		lowest := func(x, y Point) int {
			if c := cmpFloat(x.Amplification, y.Amplification); c != 0 {
				return c
			}
			return x.Lost - y.Lost
		}
		best := func(x, y Point) int {
			if x.Lost != y.Lost {
				return x.Lost - y.Lost
			}
			return x.Denied - y.Denied
		}
		if target.Amplification <= 0 {
			best = lowest
		}
		if a.Best = pick(meets, best); a.Best != nil {
			a.Met = true
		} else {
			a.Best = pick(a.Curve, lowest)
		}
		if a.Best != nil && a.Best.Setting.floor > 0 {
			a.Floor = fmt.Sprintf("its floor, %s %s per instance, is %s across %d instances", num(a.Best.Setting.floor),
				a.Best.Setting.floorUnit, num(math.Round(a.Best.Setting.floor*float64(a.Instances)*1000)/1000), a.Instances)
		}
		out = append(out, a)
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case math.Abs(a-b) < 1e-12:
		return 0
	case a < b:
		return -1
	}
	return 1
}
