package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/gateway/internal/hub"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

func publishN(t *testing.T, r *natstest.Run, n int) {
	t.Helper()
	for i := range n {
		if _, err := r.Text(t.Context(), fmt.Sprintf("part %d ", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTwoSSEOneGRPCAndOneWebSocketClientSeeIdenticalSequences(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-fan")
	publishN(t, r, 5)

	type result struct {
		seqs []string
		err  error
	}
	results := make(chan result, 4)
	for range 2 {
		c, err := e.sse(ctx, "/v1/runs/run-fan/events?cursor=earliest", bearerHeader(keyAcme))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			evs, err := c.all()
			var seqs []string
			for _, ev := range evs {
				var env struct {
					Seq    string `json:"seq"`
					Type   string `json:"type"`
					Cursor string `json:"cursor"`
				}
				if err := json.Unmarshal([]byte(ev.data), &env); err != nil || env.Type != ev.event || env.Cursor != ev.id {
					results <- result{err: fmt.Errorf("bad SSE event %+v: %v", ev, err)}
					return
				}
				seqs = append(seqs, ev.id+":"+ev.event)
			}
			results <- result{seqs, err}
		}()
	}
	st, err := e.client.StreamRunEvents(withKey(ctx, keyAcme), &baagentv1.StreamRunEventsRequest{RunId: "run-fan", After: "earliest"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var seqs []string
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				results <- result{seqs, nil}
				return
			}
			if err != nil {
				results <- result{seqs, err}
				return
			}
			seqs = append(seqs, m.GetEvent().GetCursor()+":"+m.GetEvent().GetType())
		}
	}()
	tok := e.streamToken(t, keyAcme)
	ws, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-fan/ws?cursor=earliest&token="+tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	go func() {
		var seqs []string
		for {
			m, err := ws.Read()
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != websocket.StatusNormalClosure {
					err = fmt.Errorf("close %v", ce)
				} else {
					err = nil
				}
				results <- result{seqs, err}
				return
			}
			if err != nil {
				results <- result{seqs, err}
				return
			}
			var env struct{ Cursor, Type string }
			_ = json.Unmarshal(m, &env)
			seqs = append(seqs, env.Cursor+":"+env.Type)
		}
	}()

	publishN(t, r, 60)
	if _, err := r.Complete(ctx, "the answer"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 65; i++ {
		want = append(want, fmt.Sprint(i)+":text_delta")
	}
	want = append(want, "66:complete")
	for range 4 {
		res := <-results
		if res.err != nil {
			t.Fatal(res.err)
		}
		if strings.Join(res.seqs, ",") != strings.Join(want, ",") {
			t.Fatalf("got %v\nwant %v", res.seqs, want)
		}
	}
	if got := e.srvMetric(t, "baagent_gateway_events_delivered_total", "sse"); got != 2*66 {
		t.Errorf("SSE events delivered = %v", got)
	}
}

// TestCaughtUpSSEClientsAreWrittenByTheRunsFanOut: live SSE clients that
// keep up get their events from the run's fan-out goroutine (direct
// writes), byte for byte the stream a client served by its own goroutine
// gets.
func TestCaughtUpSSEClientsAreWrittenByTheRunsFanOut(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-direct")
	publishN(t, r, 1)
	const clients, events = 3, 40
	streams := make([]*sseClient, clients)
	for i := range streams {
		c, err := e.sse(ctx, "/v1/runs/run-direct/events", bearerHeader(keyAcme))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.close)
		streams[i] = c
	}
	got := publishInStep(t, ctx, r, clients, events, func(c int) (string, error) {
		ev, err := streams[c].next()
		return ev.id + ":" + ev.event + ":" + ev.data, err
	})
	for c := range streams {
		if _, err := streams[c].next(); !errors.Is(err, io.EOF) {
			t.Fatalf("client %d: after the terminal event %v, want the end of the stream", c, err)
		}
	}
	var want []string
	for _, ev := range e.replay(t, ctx, "run-direct", "1") {
		want = append(want, ev.id+":"+ev.event+":"+ev.data)
	}
	if len(want) != events+1 {
		t.Fatalf("the replay has %d events, want %d", len(want), events+1)
	}
	for c := range streams {
		if strings.Join(got[c], "\n") != strings.Join(want, "\n") {
			t.Fatalf("client %d read\n%v\nwant (as replayed)\n%v", c, got[c], want)
		}
	}
	// Most events reached the live clients without waking their goroutines
	// (a client whose goroutine had not parked yet gets an event from it).
	if direct := testutil.ToFloat64(e.srv.hub.DirectDeliveries()); direct < clients*events/2 {
		t.Errorf("%v events written by the fan-out, want most of %d", direct, clients*(events+1))
	}
	if got := e.srvMetric(t, "baagent_gateway_events_delivered_total", "sse"); got != float64(clients*(events+1)+len(want)) {
		t.Errorf("SSE events delivered = %v, want %d", got, clients*(events+1)+len(want))
	}
}

// TestCaughtUpWebSocketClientsAreWrittenByTheRunsFanOut: the same for
// WebSocket clients: their text frames come from the fan-out while they
// keep up, one message per event, as replayed.
func TestCaughtUpWebSocketClientsAreWrittenByTheRunsFanOut(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-wsdirect")
	publishN(t, r, 1)
	const clients, events = 2, 40
	tok := e.streamToken(t, keyAcme)
	socks := make([]*wsClient, clients)
	for i := range socks {
		ws, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-wsdirect/ws?token="+tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.Close() })
		socks[i] = ws
	}
	testkit.Eventually(t, 10*time.Second, "both WebSocket clients subscribed", func() bool {
		return streamClients(t, e, "websocket") == clients
	})
	got := publishInStep(t, ctx, r, clients, events, func(c int) (string, error) {
		m, err := socks[c].Read()
		return string(m), err
	})
	for c, ws := range socks {
		var ce websocket.CloseError
		if _, err := ws.Read(); !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure {
			t.Fatalf("client %d: after the terminal event %v, want a normal close", c, err)
		}
	}
	var want []string
	for _, ev := range e.replay(t, ctx, "run-wsdirect", "1") {
		want = append(want, ev.data)
	}
	for c := range socks {
		if strings.Join(got[c], "\n") != strings.Join(want, "\n") {
			t.Fatalf("client %d read\n%v\nwant (as replayed)\n%v", c, got[c], want)
		}
	}
	if direct := testutil.ToFloat64(e.srv.hub.DirectDeliveries()); direct < clients*events/2 {
		t.Errorf("%v events written by the fan-out, want most of %d", direct, clients*(events+1))
	}
}

// publishInStep publishes events text events and then the terminal one,
// each only once every client has read the one before (read(c) reads
// client c's next event), so the clients are caught up whenever an event
// arrives. It returns what each client read.
func publishInStep(t *testing.T, ctx context.Context, r *natstest.Run, clients, events int, read func(c int) (string, error)) [][]string {
	t.Helper()
	got := make([][]string, clients)
	for i := range events + 1 {
		if i < events {
			if _, err := r.Text(ctx, fmt.Sprintf("live %d ", i)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := r.Complete(ctx, "done"); err != nil {
			t.Fatal(err)
		}
		for c := range clients {
			ev, err := read(c)
			if err != nil {
				t.Fatalf("client %d after %d events: %v", c, len(got[c]), err)
			}
			got[c] = append(got[c], ev)
		}
	}
	return got
}

// replay reads a run's events after cursor over SSE, to the end.
func (e *env) replay(t *testing.T, ctx context.Context, runID, cursor string) []sseEvent {
	t.Helper()
	c, err := e.sse(ctx, "/v1/runs/"+runID+"/events?cursor="+cursor, bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	evs, err := c.all()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// publishUntilCut publishes 16 KiB events until a client of transport has
// been cut as a slow consumer, each only once the reading client (whose
// count of events read is progress) is at most two behind, so that only
// the stalled client falls behind on a loaded machine.
func (e *env) publishUntilCut(t *testing.T, ctx context.Context, r *natstest.Run, transport string, progress *atomic.Int64) {
	t.Helper()
	big := strings.Repeat("z", 16<<10)
	for i := 0; ; i++ {
		testkit.Eventually(t, 30*time.Second, "the reading client keeps up", func() bool {
			return int64(r.Seq())-1 <= progress.Load()+2
		})
		if _, err := r.Text(ctx, big); err != nil {
			t.Fatal(err)
		}
		if e.slowDisconnectsOf(transport) > 0 && i > 10 {
			return
		}
		if i > 10000 {
			t.Fatal("the stalled client was never cut")
		}
	}
}

func (e *env) srvMetric(t *testing.T, name, transport string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == transport {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return 0
}

func (e *env) streamToken(t *testing.T, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/auth/stream-token", nil)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok streamToken
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 || tok.Token == "" {
		t.Fatalf("stream token: %d %v", resp.StatusCode, err)
	}
	return tok.Token
}

func TestSSEReconnectWithLastEventIDGetsEveryLaterEventOnce(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-re")
	publishN(t, r, 20)
	c, err := e.sse(ctx, "/v1/runs/run-re/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	var last sseEvent
	for range 12 {
		if last, err = c.next(); err != nil {
			t.Fatal(err)
		}
	}
	c.close() // the client drops mid-run
	publishN(t, r, 10)
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	h := bearerHeader(keyAcme)
	h.Set("Last-Event-ID", last.id)
	// The original URL still says earliest; Last-Event-ID wins.
	c2, err := e.sse(ctx, "/v1/runs/run-re/events?cursor=earliest", h)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c2.all()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 19 || evs[0].id != "13" || evs[18].id != "31" || evs[18].event != "complete" {
		t.Fatalf("after reconnect from %s: %d events, first %+v", last.id, len(evs), evs[0])
	}
	for i, ev := range evs {
		if ev.id != fmt.Sprint(13+i) {
			t.Fatalf("event %d has id %s", i, ev.id)
		}
	}
	// A reconnect after the end gets 204 so EventSource stops retrying.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/runs/run-re/events", nil)
	req.Header = bearerHeader(keyAcme)
	req.Header.Set("Last-Event-ID", "31")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reconnect after the end: %d", resp.StatusCode)
	}
}

func TestStalledClientIsCutWithoutDelayingOthers(t *testing.T) {
	e := newEnv(t, Options{SendQueueBytes: 256 << 10, WriteTimeout: 300 * time.Millisecond})
	ctx := testCtx(t)
	r := e.run("acme", "run-stall")
	publishN(t, r, 1)

	// The stalled client: a raw connection that sends the request and never
	// reads, with a small receive buffer.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/runs/run-stall/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", keyAcme)

	reader, err := e.sse(ctx, "/v1/runs/run-stall/events", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []sseEvent, 1)
	var progress atomic.Int64
	go func() {
		defer reader.close()
		var evs []sseEvent
		for {
			ev, err := reader.next()
			if err != nil {
				got <- evs
				return
			}
			evs = append(evs, ev)
			progress.Add(1)
		}
	}()

	e.publishUntilCut(t, ctx, r, hub.TransportSSE, &progress)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	evs := <-got
	if n := len(evs); n == 0 || evs[n-1].event != "complete" || evs[0].id != "2" || evs[n-1].id != fmt.Sprint(r.Seq()) || n != int(r.Seq())-1 {
		t.Fatalf("the reading client got %d events (%v … %v), want 2..%d", n, evs[0], evs[n-1], r.Seq())
	}
}

func (e *env) slowDisconnectsOf(transport string) float64 {
	var n float64
	for _, reason := range []string{hub.SlowQueue, hub.SlowDeadline} {
		n += testutil.ToFloat64(e.srv.hubMetricSlow(transport, reason))
	}
	return n
}

// TestStalledWebSocketClientIsCutWithoutDelayingOthers: as for SSE, a
// WebSocket client that stops reading is cut (the fan-out's writes to it
// come up short, its own goroutine's write meets the deadline or its queue
// fills) while a reading client gets every event.
func TestStalledWebSocketClientIsCutWithoutDelayingOthers(t *testing.T) {
	e := newEnv(t, Options{SendQueueBytes: 256 << 10, WriteTimeout: 300 * time.Millisecond})
	ctx := testCtx(t)
	r := e.run("acme", "run-wsstall")
	publishN(t, r, 1)
	tok := e.streamToken(t, keyAcme)

	// The stalled client: a raw connection that completes the handshake
	// request and never reads, with a small receive buffer.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/runs/run-wsstall/ws?token=%s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", tok)

	ws, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-wsstall/ws?token="+tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	testkit.Eventually(t, 10*time.Second, "both WebSocket clients subscribed", func() bool {
		return streamClients(t, e, "websocket") == 2
	})
	got := make(chan []string, 1)
	var progress atomic.Int64
	go func() {
		var cursors []string
		for {
			m, err := ws.Read()
			if err != nil {
				got <- cursors
				return
			}
			var env struct{ Cursor string }
			_ = json.Unmarshal(m, &env)
			cursors = append(cursors, env.Cursor)
			progress.Add(1)
		}
	}()

	e.publishUntilCut(t, ctx, r, hub.TransportWS, &progress)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	cursors := <-got
	if n := len(cursors); n != int(r.Seq())-1 || cursors[0] != "2" || cursors[n-1] != fmt.Sprint(r.Seq()) {
		t.Fatalf("the reading client got %d events (%v … %v), want 2..%d", n, cursors[0], cursors[n-1], r.Seq())
	}
}

func TestCrossTenantAccessIsNotFound(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-secret")
	publishN(t, r, 3)

	_, err := e.client.GetRun(withKey(ctx, keyInitech), &baagentv1.GetRunRequest{RunId: "run-secret"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetRun as another tenant: %v", err)
	}
	st, err := e.client.StreamRunEvents(withKey(ctx, keyInitech), &baagentv1.StreamRunEventsRequest{RunId: "run-secret", After: "earliest"})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("StreamRunEvents as another tenant: %v", err)
	}
	// Even while acme is watching (the feed is active), initech gets nothing.
	c, err := e.sse(ctx, "/v1/runs/run-secret/events?cursor=earliest", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := c.next(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialWS(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/v1/runs/run-secret/ws", bearerHeader(keyInitech)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("WebSocket as initech: %v", err)
	}
	for _, path := range []string{"/v1/runs/run-secret", "/v1/runs/run-secret/events?cursor=earliest"} {
		if code := e.status(ctx, path, bearerHeader(keyInitech)); code != http.StatusNotFound {
			t.Errorf("%s as initech: %d", path, code)
		}
	}
	if code := e.status(ctx, "/v1/runs/run-secret/events?token="+e.streamToken(t, keyInitech), nil); code != http.StatusNotFound {
		t.Errorf("SSE with initech's token: %d", code)
	}
	for name, h := range map[string]http.Header{
		"no key":    nil,
		"wrong key": bearerHeader("not-a-configured-key"),
	} {
		if code := e.status(ctx, "/v1/runs/run-secret", h); code != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, code)
		}
	}
	if code := e.status(ctx, "/v1/runs/run-secret/events?token=v1.forged.mac", nil); code != http.StatusUnauthorized {
		t.Errorf("forged token: %d", code)
	}
	// A token is not accepted on the JSON API.
	if code := e.status(ctx, "/v1/runs/run-secret?token="+e.streamToken(t, keyAcme), nil); code != http.StatusUnauthorized {
		t.Errorf("token on the JSON API: %d", code)
	}
	if _, err := e.client.ListRuns(ctx, &baagentv1.ListRunsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without a key: %v", err)
	}
}

func (e *env) status(ctx interface {
	Done() <-chan struct{}
}, path string, h http.Header) int {
	req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestExpiredCursorGetsStreamResetOverSSE(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := e.run("acme", "run-exp")
	var pos []uint64
	for i := range 8 {
		p, err := r.Text(ctx, fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	stream, err := e.js.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := natsx.EventSubject("acme", "run-exp")
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(pos[4])); err != nil {
		t.Fatal(err)
	}
	c, err := e.sse(ctx, "/v1/runs/run-exp/events?cursor=1", bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.all()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 6 || evs[0].event != "stream_reset" || evs[0].id != "4" || evs[1].id != "5" || evs[5].event != "complete" {
		t.Fatalf("events %+v", evs)
	}
	var reset struct {
		StreamReset struct {
			RequestedCursor string `json:"requested_cursor"`
			EarliestSeq     string `json:"earliest_seq"`
			Reason          string `json:"reason"`
		} `json:"stream_reset"`
	}
	if err := json.Unmarshal([]byte(evs[0].data), &reset); err != nil || reset.StreamReset.EarliestSeq != "5" || reset.StreamReset.Reason != hub.ReasonExpired || reset.StreamReset.RequestedCursor != "1" {
		t.Fatalf("reset %s: %v", evs[0].data, err)
	}
}

func TestHTTPJSONAPI(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(ctx, method, e.base+path, strings.NewReader(body))
		req.Header.Set("x-api-key", keyAcme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code, m := do("POST", "/v1/runs", `{"spec":{"input":"Which region grew fastest?","max_steps":5}}`)
	run, _ := m["run"].(map[string]any)
	if code != 200 || run["run_id"] != "run-1" || run["tenant"] != "acme" || run["state"] != "RUN_STATE_QUEUED" {
		t.Fatalf("start: %d %v", code, m)
	}
	if code, m = do("GET", "/v1/runs/run-1", ""); code != 200 {
		t.Fatalf("get: %d %v", code, m)
	}
	if code, m = do("GET", "/v1/runs?states=queued&page_size=10", ""); code != 200 || len(m["runs"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, m)
	}
	code, m = do("POST", "/v1/runs", `{"spec":{"input":""}}`)
	errBody, _ := m["error"].(map[string]any)
	if code != 400 || errBody["code"] != "INVALID_ARGUMENT" || !strings.Contains(fmt.Sprint(errBody["fields"]), "spec.input") {
		t.Fatalf("invalid start: %d %v", code, m)
	}
	if code, m = do("POST", "/v1/runs", `{"spec":`); code != 400 {
		t.Fatalf("broken JSON: %d %v", code, m)
	}
	if code, m = do("GET", "/v1/runs?states=bogus", ""); code != 400 {
		t.Fatalf("bad state: %d %v", code, m)
	}
	// The orchestrator fake does not implement CancelRun: a clear 501.
	code, m = do("POST", "/v1/runs/run-1/cancel", `{"reason":"stop"}`)
	errBody, _ = m["error"].(map[string]any)
	if code != 501 || !strings.Contains(fmt.Sprint(errBody["message"]), "orchestrator") {
		t.Fatalf("cancel: %d %v", code, m)
	}
	// No skills peer configured: Unavailable naming it.
	if code, m = do("GET", "/v1/skills", ""); code != 503 {
		t.Fatalf("skills: %d %v", code, m)
	}
	if code, m = do("GET", "/v1/whoami", ""); code != 200 || m["tenant"] != "acme" || m["keys_required"] != true {
		t.Fatalf("whoami: %d %v", code, m)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "BA-Agent") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("dashboard: %d", resp.StatusCode)
	}
}

func TestNoKeysServesDefaultTenantOnLoopback(t *testing.T) {
	e := newEnv(t, Options{APIKeys: map[string]string{}})
	ctx := testCtx(t)
	r := e.run(DefaultTenant, "run-local")
	publishN(t, r, 2)
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	c, err := e.sse(ctx, "/v1/runs/run-local/events?cursor=earliest", nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.all()
	if err != nil || len(evs) != 3 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	if _, err := e.srv.auth.tenantForKey("", &net.TCPAddr{IP: net.ParseIP("10.1.2.3")}); !errors.Is(err, errNotLoopback) {
		t.Fatalf("a non-loopback client without keys: %v", err)
	}
}
