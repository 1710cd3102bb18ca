package gateway

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

func keyID(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// TestStreamLimitPerKeyCountsEveryTransport: gRPC, SSE and WebSocket
// streams of one key, and those of its stream tokens, share one limit;
// one more is refused naming it; another key is not affected; a closed
// stream frees its slot.
func TestStreamLimitPerKeyCountsEveryTransport(t *testing.T) {
	const limit = 3
	e := newEnv(t, Options{MaxStreamsPerKey: limit})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	r := e.run("acme", "run-a")
	publishN(t, r, 1)
	e.run("initech", "run-i")

	sse, err := e.sse(ctx, "/v1/runs/run-a/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	defer sse.close()
	ws, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-a/ws?token="+e.streamToken(t, keyAcme), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := e.client.StreamRunEvents(withKey(ctx, keyAcme), &baagentv1.StreamRunEventsRequest{RunId: "run-a", After: "earliest"})
	if err == nil {
		_, err = st.Recv()
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := e.srv.streamSlots.count(keyID(keyAcme)); n != limit {
		t.Fatalf("acme holds %d stream slots, want %d", n, limit)
	}

	// One more, over each transport and with a token of the key.
	err = streamCall(e.client, &baagentv1.StreamRunEventsRequest{RunId: "run-a"})(withKey(ctx, keyAcme))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), fmt.Sprintf("already holds %d open event streams", limit)) {
		t.Errorf("gRPC stream over the limit: %v", err)
	}
	for _, path := range []string{"/v1/runs/run-a/events", "/v1/runs/run-a/events?token=" + e.streamToken(t, keyAcme)} {
		code, body, _ := e.send(t, request{method: "GET", path: path, header: map[string]string{"Authorization": "Bearer " + keyAcme}})
		if code != http.StatusTooManyRequests || !strings.Contains(body, "TOO_MANY_STREAMS") && !strings.Contains(body, "stream limit") {
			t.Errorf("SSE %s over the limit: %d %s", path, code, body)
		}
	}
	if _, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-a/ws", bearerHeader(keyAcme)); err == nil || !strings.Contains(err.Error(), "429") {
		t.Errorf("WebSocket over the limit: %v", err)
	}
	if got := testutil.ToFloat64(e.srv.edge.limited.WithLabelValues(limitStreams, apiHTTP)) + testutil.ToFloat64(e.srv.edge.limited.WithLabelValues(limitStreams, apiGRPC)); got != 4 {
		t.Errorf("concurrency_limited_total{limit=streams} = %v, want 4", got)
	}
	// Unary calls are not streams; another key has its own streams.
	if _, err := e.client.GetRun(withKey(ctx, keyAcme), &baagentv1.GetRunRequest{RunId: "run-a"}); err != nil {
		t.Errorf("GetRun at the stream limit: %v", err)
	}
	other, err := e.sse(ctx, "/v1/runs/run-i/events", bearerHeader(keyInitech))
	if err != nil {
		t.Errorf("initech's stream while acme is at its limit: %v", err)
	} else {
		other.close()
	}

	// Closing a stream gives its slot back.
	sse.close()
	testkit.Eventually(t, 10*time.Second, "acme's closed SSE stream released", func() bool {
		return e.srv.streamSlots.count(keyID(keyAcme)) == limit-1
	})
	again, err := e.sse(ctx, "/v1/runs/run-a/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatalf("a stream after closing one: %v", err)
	}
	again.close()
	ws.Close()
	cancel()
	testkit.Eventually(t, 10*time.Second, "every slot released", func() bool {
		return testutil.ToFloat64(e.srv.edge.held.WithLabelValues(limitStreams)) == 0
	})
}

// slowPost starts a POST whose body never arrives in full: it holds the
// request open (and its key's in-flight slot) until the connection closes.
func (e *env) slowPost(t *testing.T, key string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"spec\":", strings.TrimPrefix(e.base, "http://"), key); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestInFlightLimitPerKey(t *testing.T) {
	const limit = 2
	e := newEnv(t, Options{MaxInFlightPerKey: limit})
	conns := []net.Conn{e.slowPost(t, keyAcme), e.slowPost(t, keyAcme)}
	testkit.Eventually(t, 10*time.Second, "two slow requests in progress", func() bool {
		return e.srv.inFlight.count(keyID(keyAcme)) == limit
	})
	code, body, h := e.send(t, request{method: "GET", path: "/v1/runs", header: map[string]string{"Authorization": "Bearer " + keyAcme}})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "in-flight limit") || h.Get("Retry-After") == "" {
		t.Errorf("a third request: %d %s (Retry-After %q), want 429 naming the in-flight limit", code, body, h.Get("Retry-After"))
	}
	if _, err := e.client.ListRuns(withKey(testCtx(t), keyAcme), &baagentv1.ListRunsRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC call at the limit: %v", err)
	}
	if code, body, _ := e.send(t, request{method: "GET", path: "/v1/runs", header: map[string]string{"Authorization": "Bearer " + keyInitech}}); code != 200 {
		t.Errorf("another key at acme's limit: %d %s", code, body)
	}
	// Finishing a body frees its slot.
	if _, err := io.WriteString(conns[0], `{"input":"x"}}`+strings.Repeat(" ", 1000-len(`{"spec":{"input":"x"}}`))); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conns[0]), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the completed slow request: %v %v", resp, err)
	}
	resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, "the finished request's slot released", func() bool {
		return e.srv.inFlight.count(keyID(keyAcme)) == limit-1
	})
	if code, body, _ := e.send(t, request{method: "GET", path: "/v1/runs", header: map[string]string{"Authorization": "Bearer " + keyAcme}}); code != 200 {
		t.Errorf("after one finished: %d %s", code, body)
	}
}

// TestSlowBodyIsCutByTheReadTimeout: a body that does not arrive within
// BodyReadTimeout is answered 408 and its connection closed, whether the
// request was authenticated (its handler reads the body) or not (net/http
// discards it); a slow call after the body is in is not cut.
func TestSlowBodyIsCutByTheReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t, Options{BodyReadTimeout: timeout})
	for _, key := range []string{keyAcme, "not-a-configured-key"} {
		conn := e.slowPost(t, key)
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("key %s: no answer to a slow body: %v", key, err)
		}
		b, _ := io.ReadAll(resp.Body) // to the close: the connection ends
		resp.Body.Close()
		want := http.StatusRequestTimeout
		if key != keyAcme {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want {
			t.Errorf("key %s: %d %s, want %d", key, resp.StatusCode, b, want)
		}
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("key %s: the connection stays open after the body timed out", key)
		}
		if waited := time.Since(start); waited < timeout {
			t.Errorf("key %s: cut after %v, before the timeout", key, waited)
		}
	}
	if got := testutil.ToFloat64(e.srv.edge.bodyTimeouts); got != 1 {
		t.Errorf("body_read_timeouts_total = %v, want 1", got)
	}
	if n := e.srv.inFlight.count(keyID(keyAcme)); n != 0 {
		t.Errorf("%d in-flight slots still held", n)
	}

	// A call slower than the timeout once its body is in completes.
	code, body := startRunHeld(t, e, 3*timeout) // well past the body deadline
	if code != 200 {
		t.Errorf("a call that outlasts the body timeout: %d %s", code, body)
	}
}

// startRunHeld starts a run over HTTP as acme while the fake orchestrator
// holds StartRun for hold, and returns the answer's status and body.
func startRunHeld(t *testing.T, e *env, hold time.Duration) (int, string) {
	t.Helper()
	release := make(chan struct{})
	e.orch.mu.Lock()
	e.orch.fail = func(method string) error {
		if method == "StartRun" {
			<-release
		}
		return nil
	}
	e.orch.mu.Unlock()
	go func() {
		defer close(release)
		<-time.After(hold)
	}()
	code, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: `{"spec":{"input":"x"}}`,
		header: map[string]string{"Authorization": "Bearer " + keyAcme, "Content-Type": "application/json"}})
	return code, body
}
