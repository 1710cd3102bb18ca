package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcserver"
)

// fakeClock is a settable time source.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func id(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func TestRateLimiterBurstRefillAndRetryHint(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := newRateLimiter(10, 3, 0, clk.now)
	a, b := id("a"), id("b")
	for i := range 3 {
		if ok, _ := l.allow(a); !ok {
			t.Fatalf("request %d of a burst of 3 refused", i+1)
		}
	}
	ok, wait := l.allow(a)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("4th request: allowed %v, retry after %v; want refused, 100ms", ok, wait)
	}
	// Another key is not affected.
	if ok, _ := l.allow(b); !ok {
		t.Fatal("key b limited by key a's use")
	}
	clk.advance(50 * time.Millisecond)
	if ok, wait := l.allow(a); ok || wait != 50*time.Millisecond {
		t.Fatalf("half a token later: allowed %v, retry after %v", ok, wait)
	}
	clk.advance(50 * time.Millisecond)
	if ok, _ := l.allow(a); !ok {
		t.Fatal("a token later: refused")
	}
	// A long idle time refills to the burst, not beyond.
	clk.advance(time.Hour)
	for i := range 3 {
		if ok, _ := l.allow(a); !ok {
			t.Fatalf("after idling, request %d refused", i+1)
		}
	}
	if ok, _ := l.allow(a); ok {
		t.Fatal("after idling, more than the burst allowed")
	}
}

func TestRateLimiterDefaultsAndOff(t *testing.T) {
	for _, off := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if l := newRateLimiter(off, 0, 0, time.Now); l != nil {
			t.Fatalf("rate %g built a limiter", off)
		}
	}
	l := newRateLimiter(DefaultRateLimit, 0, 0, time.Now)
	if l.rate != DefaultRateLimit || l.burst != DefaultRateBurst || l.maxBuckets != DefaultMaxRateBuckets {
		t.Fatalf("defaults: rate %g burst %g buckets %d", l.rate, l.burst, l.maxBuckets)
	}
	if l := newRateLimiter(500, 0, 0, time.Now); l.burst != 500 {
		t.Fatalf("burst %g for rate 500: want at least the rate", l.burst)
	}
}

func TestRateLimiterBucketsAreBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := newRateLimiter(1, 2, 4, clk.now)
	// Four keys in use (each has spent a token, none has refilled).
	for i := range 4 {
		l.allow(id(fmt.Sprint("busy", i)))
		clk.advance(time.Millisecond)
	}
	for i := range 100 {
		l.allow(id(fmt.Sprint("new", i)))
		if n := l.size(); n > 4 {
			t.Fatalf("%d buckets after %d new keys, cap 4", n, i+1)
		}
	}
	// Buckets that have refilled are dropped first: they carry no state.
	clk.advance(time.Minute)
	l.allow(id("late"))
	if n := l.size(); n != 1 {
		t.Fatalf("%d buckets after every other one refilled, want 1", n)
	}
}

func TestHTTPRateLimitPerKeyWith429AndRetryAfter(t *testing.T) {
	e := newEnv(t, Options{RateLimit: 0.5, RateBurst: 2})
	ctx := testCtx(t)
	e.run("acme", "run-rl")
	get := func(key, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
		req.Header = bearerHeader(key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for i := range 2 {
		if resp := get(keyAcme, "/v1/runs"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, resp.StatusCode)
		}
	}
	resp := get(keyAcme, "/v1/runs")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("over the limit: %d, want 429", resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1-2 s (a token every 2 s)", resp.Header.Get("Retry-After"))
	}
	var body errorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != "RESOURCE_EXHAUSTED" || !strings.Contains(body.Error.Message, "rate limit") {
		t.Fatalf("body %+v, %v", body, err)
	}
	// Opening a stream counts too.
	if resp := get(keyAcme, "/v1/runs/run-rl/events"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("SSE open over the limit: %d, want 429", resp.StatusCode)
	}
	// Another key is unaffected; a bad key is refused as such, not limited.
	if resp := get(keyInitech, "/v1/runs"); resp.StatusCode != http.StatusOK {
		t.Fatalf("initech while acme is limited: %d", resp.StatusCode)
	}
	if resp := get("not-a-key-0123456789", "/v1/runs"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown key: %d, want 401", resp.StatusCode)
	}
	if got := e.srvMetric(t, "baagent_gateway_rate_limited_total", apiHTTP); got != 2 {
		t.Fatalf("rate_limited_total{api=http} = %v, want 2", got)
	}
}

func TestGRPCRateLimitPerKeyWithRetryInfo(t *testing.T) {
	e := newEnv(t, Options{RateLimit: 0.5, RateBurst: 2})
	ctx := testCtx(t)
	r := e.run("acme", "run-rlg")
	publishN(t, r, 1)
	acme, initech := withKey(ctx, keyAcme), withKey(ctx, keyInitech)
	for i := range 2 {
		if _, err := e.client.ListRuns(acme, &baagentv1.ListRunsRequest{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	_, err := e.client.GetRun(acme, &baagentv1.GetRunRequest{RunId: "run-rlg"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("over the limit: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || retry.GetRetryDelay().AsDuration() > 2*time.Second {
		t.Fatalf("retry hint %v, want (0, 2s]", retry)
	}
	// Opening a stream counts too.
	stream, err := e.client.StreamRunEvents(acme, &baagentv1.StreamRunEventsRequest{RunId: "run-rlg"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream open over the limit: %v", err)
	}
	if _, err := e.client.ListRuns(initech, &baagentv1.ListRunsRequest{}); err != nil {
		t.Fatalf("initech while acme is limited: %v", err)
	}
	if got := e.srvMetric(t, "baagent_gateway_rate_limited_total", apiGRPC); got != 2 {
		t.Fatalf("rate_limited_total{api=grpc} = %v, want 2", got)
	}
}

func TestNoRateLimitAndNoKeysAreNotLimited(t *testing.T) {
	for name, opts := range map[string]Options{
		"off":     {RateLimit: 0},
		"no keys": {RateLimit: 1, RateBurst: 1, APIKeys: map[string]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, opts)
			ctx := testCtx(t)
			key := keyAcme
			if len(opts.APIKeys) == 0 && opts.APIKeys != nil {
				key = ""
			}
			for i := range 20 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/runs", nil)
				if key != "" {
					req.Header = bearerHeader(key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d", i+1, resp.StatusCode)
				}
			}
		})
	}
}

func TestHTTPBodyOverTheLimitIs413AndReadOnlyWhenAuthenticated(t *testing.T) {
	e := newEnv(t, Options{MaxBodyBytes: 1024})
	ctx := testCtx(t)
	post := func(key string, body string) (*http.Response, errorBody) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/runs", strings.NewReader(body))
		if key != "" {
			req.Header = bearerHeader(key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb errorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp, eb
	}
	big := `{"spec":{"input":"` + strings.Repeat("x", 2048) + `"}}`
	resp, eb := post(keyAcme, big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || eb.Error.Code != "RESOURCE_EXHAUSTED" ||
		len(eb.Error.Fields) != 1 || eb.Error.Fields[0].Field != "body" {
		t.Fatalf("oversize body: %d %+v, want 413 naming body", resp.StatusCode, eb)
	}
	if resp, _ := post("", big); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("oversize body without a key: %d, want 401 before the body is read", resp.StatusCode)
	}
	if resp, eb := post(keyAcme, `{"spec":{"input":"hello"}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("small body: %d %+v", resp.StatusCode, eb)
	}
}

func TestHTTPHeadersOverTheLimitAreRefused(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/runs", nil)
	req.Header = bearerHeader(keyAcme)
	req.Header.Set("X-Padding", strings.Repeat("p", DefaultMaxHeaderBytes+8192))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversize headers: %d, want 431", resp.StatusCode)
	}
}

// The gRPC server the gateway is registered on bounds a message
// (grpcserver.Options.MaxRecvMsgBytes, 16 MiB by default); a larger
// request is ResourceExhausted before it reaches the gateway.
func TestGRPCMessageOverTheLimitIsResourceExhausted(t *testing.T) {
	e := newEnv(t, Options{})
	gs := grpcserver.New(grpcserver.Options{Name: "gateway-test", MaxRecvMsgBytes: 64 << 10, Addr: "127.0.0.1:0"})
	e.srv.Register(gs.GRPC())
	ctx, cancel := context.WithCancel(testCtx(t))
	served := make(chan error, 1)
	if err := gs.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { served <- gs.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	conn, err := grpc.NewClient(gs.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := baagentv1.NewGatewayServiceClient(conn)
	_, err = client.StartRun(withKey(ctx, keyAcme), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: strings.Repeat("x", 100<<10)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("100 KiB request to a 64 KiB server: %v, want ResourceExhausted", err)
	}
	if _, err := client.StartRun(withKey(ctx, keyAcme), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: "hello"}}); err != nil {
		t.Fatalf("small request: %v", err)
	}
}
