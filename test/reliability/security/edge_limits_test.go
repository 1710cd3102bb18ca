package security

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	gw "github.com/baagent/baagent/services/gateway"
)

// TestStreamsPerKeyAreLimited: one API key cannot hold more than
// gateway.DefaultMaxStreamsPerKey event streams at once, counted over gRPC
// StreamRunEvents, SSE and WebSocket together; the next one is refused
// (ResourceExhausted, HTTP 429) with a message naming the limit, another
// key is unaffected, and closing a stream frees its slot.
func TestStreamsPerKeyAreLimited(t *testing.T) {
	// Rate limiting off: opening the streams must not be refused for
	// its rate, which is not what this test is about.
	s := harnessStart(t, nil, "-api-keys="+keyAcme+"=acme,"+keyGlobex+"=globex", scenariosDir(t), "-gateway-rate-limit=0")
	acme, globex := gateway(t, s, keyAcme), gateway(t, s, keyGlobex)
	runA, runG := waitingRun(t, acme), waitingRun(t, globex)
	addr := s.App.GatewayHTTPAddr().String()
	limit := gw.DefaultMaxStreamsPerKey
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// openGRPC opens a stream and returns it with the error of its first
	// receive (nil: the stream is held, its replay has begun).
	openGRPC := func(ctx context.Context, c *tenantClient, run string) (grpc.ServerStreamingClient[baagentv1.StreamRunEventsResponse], error) {
		st, err := c.gw.StreamRunEvents(withAuth(ctx, c.key), &baagentv1.StreamRunEventsRequest{RunId: run, After: "earliest"})
		if err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	held, release := context.WithCancel(ctx)
	defer release()
	for i := range limit - 2 {
		if _, err := openGRPC(held, acme, runA); err != nil {
			t.Fatalf("gRPC stream %d of %d: %v", i+1, limit, err)
		}
	}
	sseCtx, closeSSE := context.WithCancel(held)
	defer closeSSE()
	sseReq, _ := http.NewRequestWithContext(sseCtx, http.MethodGet, "http://"+addr+"/v1/runs/"+url.PathEscape(runA)+"/events?cursor=earliest", nil)
	sseReq.Header.Set("Authorization", "Bearer "+keyAcme)
	sse, err := httpClient("").Do(sseReq)
	if err != nil || sse.StatusCode != http.StatusOK {
		t.Fatalf("SSE stream %d of %d: %v %v", limit-1, limit, err, sse)
	}
	defer sse.Body.Close()
	wsPath := "/v1/runs/" + url.PathEscape(runA) + "/ws?cursor=earliest"
	if ws := wsHandshake(t, ctx, addr, wsPath, map[string]string{"Authorization": "Bearer " + keyAcme}); ws.status != http.StatusSwitchingProtocols {
		t.Fatalf("WebSocket stream %d of %d: %d %s", limit, limit, ws.status, ws.body)
	}

	// One more, over each transport.
	if _, err := openGRPC(ctx, acme, runA); status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "stream") {
		t.Errorf("gRPC stream %d: %v, want ResourceExhausted naming the stream limit", limit+1, err)
	}
	code, body := edgeRequest{method: http.MethodGet, path: "/v1/runs/" + url.PathEscape(runA) + "/events?cursor=earliest",
		header: map[string]string{"Authorization": "Bearer " + keyAcme}}.do(t, ctx, addr)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "stream") {
		t.Errorf("SSE stream %d: %d %.300s, want 429 naming the stream limit", limit+1, code, body)
	}
	if ws := wsHandshake(t, ctx, addr, wsPath, map[string]string{"Authorization": "Bearer " + keyAcme}); ws.status != http.StatusTooManyRequests {
		t.Errorf("WebSocket stream %d: %d %.300s, want 429", limit+1, ws.status, ws.body)
	}
	// Unary calls are not streams: still served.
	if _, err := acme.gw.GetRun(acme.ctx(t), &baagentv1.GetRunRequest{RunId: runA}); err != nil {
		t.Errorf("GetRun while holding every stream: %v", err)
	}
	// Another key is unaffected.
	if _, err := openGRPC(ctx, globex, runG); err != nil {
		t.Errorf("globex's first stream while acme holds %d: %v", limit, err)
	}

	// Closing a stream frees its slot (once the gateway has seen it go).
	closeSSE()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := openGRPC(held, acme, runA)
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("a stream after closing one: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFailedAuthIsThrottledPerAddress: after
// gateway.DefaultAuthFailureLimit invalid credentials from one address
// within a window, further requests from that address are answered 429
// (gRPC ResourceExhausted) without their key being looked at, even a valid
// one; another address is unaffected.
func TestFailedAuthIsThrottledPerAddress(t *testing.T) {
	s, acme, _ := twoTenants(t)
	addr := s.App.GatewayHTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := func(from, key string) edgeRequest {
		return edgeRequest{method: http.MethodGet, path: "/v1/runs", from: from, header: map[string]string{"Authorization": "Bearer " + key}}
	}
	const wrong = "wrong-key-0123456789abcdef"
	for i := range gw.DefaultAuthFailureLimit {
		if code, body := req("127.0.0.1", wrong).do(t, ctx, addr); code != http.StatusUnauthorized {
			t.Fatalf("wrong key %d from 127.0.0.1: %d %.200s, want 401", i+1, code, body)
		}
	}
	if code, body := req("127.0.0.1", wrong).do(t, ctx, addr); code != http.StatusTooManyRequests {
		t.Errorf("wrong key %d from 127.0.0.1: %d %.200s, want 429", gw.DefaultAuthFailureLimit+1, code, body)
	}
	if code, body := req("127.0.0.1", keyAcme).do(t, ctx, addr); code != http.StatusTooManyRequests {
		t.Errorf("a valid key from the throttled 127.0.0.1: %d %.200s, want 429", code, body)
	}
	// gRPC from the same address (the suite dials from 127.0.0.1).
	if _, err := acme.gw.ListRuns(acme.ctx(t), &baagentv1.ListRunsRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC with a valid key from the throttled 127.0.0.1: %v, want ResourceExhausted", err)
	}
	// Another address is unaffected, and its own failures are its own.
	if code, body := req("127.0.0.2", keyAcme).do(t, ctx, addr); code != http.StatusOK {
		t.Errorf("a valid key from 127.0.0.2: %d %.200s, want 200", code, body)
	}
	if code, body := req("127.0.0.2", wrong).do(t, ctx, addr); code != http.StatusUnauthorized {
		t.Errorf("a wrong key from 127.0.0.2: %d %.200s, want 401", code, body)
	}
}

// TestGRPCAuthenticatesBeforeValidating: a caller without a valid key gets
// Unauthenticated from every RPC, even for an invalid request, and so
// learns nothing about the validation rules (as over HTTP).
func TestGRPCAuthenticatesBeforeValidating(t *testing.T) {
	s, _, _ := twoTenants(t)
	for _, key := range []string{"", "wrong-key-0123456789abcdef"} {
		c := gateway(t, s, key)
		ctx := c.ctx(t)
		calls := map[string]func() error{
			"StartRun": func() error { _, err := c.gw.StartRun(ctx, &baagentv1.StartRunRequest{}); return err },
			"GetRun":   func() error { _, err := c.gw.GetRun(ctx, &baagentv1.GetRunRequest{RunId: "../x"}); return err },
			"ListRuns": func() error {
				_, err := c.gw.ListRuns(ctx, &baagentv1.ListRunsRequest{PageSize: -1})
				return err
			},
			"CancelRun":   func() error { _, err := c.gw.CancelRun(ctx, &baagentv1.CancelRunRequest{}); return err },
			"SubmitInput": func() error { _, err := c.gw.SubmitInput(ctx, &baagentv1.SubmitInputRequest{}); return err },
			"StreamRunEvents": func() error {
				st, err := c.gw.StreamRunEvents(ctx, &baagentv1.StreamRunEventsRequest{After: "not a cursor"})
				if err != nil {
					return err
				}
				_, err = st.Recv()
				return err
			},
			"ListSkills": func() error {
				_, err := c.gw.ListSkills(ctx, &baagentv1.GatewayServiceListSkillsRequest{Project: "../x"})
				return err
			},
			"GetSkill":   func() error { _, err := c.gw.GetSkill(ctx, &baagentv1.GatewayServiceGetSkillRequest{}); return err },
			"InvokeTool": func() error { _, err := c.gw.InvokeTool(ctx, &baagentv1.InvokeToolRequest{}); return err },
			"CountTokens": func() error {
				_, err := c.gw.CountTokens(ctx, &baagentv1.GatewayServiceCountTokensRequest{})
				return err
			},
		}
		for name, call := range calls {
			if err := call(); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s with key %q and an invalid request: %v, want Unauthenticated", name, key, err)
			}
		}
	}
}

// TestUnauthenticatedAnswersNameARouteThatWorks: the 401 of a bad stream
// token tells the client where to get a new one; that route answers.
func TestUnauthenticatedAnswersNameARouteThatWorks(t *testing.T) {
	s, acme, _ := twoTenants(t)
	addr := s.App.GatewayHTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, _ := acme.runToEnd(t, &baagentv1.RunSpec{Input: question})
	code, body := edgeRequest{method: http.MethodGet, path: "/v1/runs/" + url.PathEscape(run.GetRunId()) + "/events?token=v1.forged.forged"}.do(t, ctx, addr)
	route := regexp.MustCompile(`(GET|POST) (/v1/[a-z/_-]+)`).FindStringSubmatch(body)
	if code != http.StatusUnauthorized || route == nil {
		t.Fatalf("a forged stream token: %d %s, want 401 naming a route", code, body)
	}
	code, got := edgeRequest{method: route[1], path: route[2], body: "{}",
		header: map[string]string{"Authorization": "Bearer " + keyAcme, "Content-Type": "application/json"}}.do(t, ctx, addr)
	if code != http.StatusOK || !strings.Contains(got, `"token"`) {
		t.Errorf("%s %s, named by the 401: %d %.200s, want 200 with a token", route[1], route[2], code, got)
	}
}

func withAuth(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}
