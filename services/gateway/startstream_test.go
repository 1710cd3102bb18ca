package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// publishOnStart makes every run started through e publish n text events
// before StartRun answers, as a fast run does; the run's publishers are
// sent on the returned channel.
func (e *env) publishOnStart(t *testing.T, n int) <-chan *natstest.Run {
	runs := make(chan *natstest.Run, 8)
	e.orch.mu.Lock()
	e.orch.onStart = func(run *baagentv1.Run) {
		r := natstest.NewRun(e.js, run.GetTenant(), run.GetRunId())
		for range n {
			if _, err := r.Text(context.Background(), "early "); err != nil {
				t.Errorf("publish: %v", err)
			}
		}
		runs <- r
	}
	e.orch.mu.Unlock()
	return runs
}

// streamClients is the gauge of clients streaming over transport.
func (e *env) streamClients(t *testing.T, transport string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baagent_gateway_stream_clients" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == transport && m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestStartRunThenLiveOnlyStreamLosesTheFirstEvents reproduces why
// StartRunStream exists: a run publishes as soon as it starts, and a
// StreamRunEvents with the default (live-only) cursor opened after
// StartRun returns never sees those events.
func TestStartRunThenLiveOnlyStreamLosesTheFirstEvents(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	runs := e.publishOnStart(t, 3)
	resp, err := e.client.StartRun(withKey(ctx, keyAcme), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	r := <-runs
	st, err := e.client.StreamRunEvents(withKey(ctx, keyAcme), &baagentv1.StreamRunEventsRequest{RunId: resp.GetRun().GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the live stream is subscribed", func() bool { return e.streamClients(t, "grpc") == 1 })
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.GetEvent().GetSeq())
	}
	if len(seqs) != 1 || seqs[0] != 4 {
		t.Fatalf("live-only stream after StartRun got seqs %v, want only [4]: events 1-3 are lost", seqs)
	}
}

func TestStartRunStreamSendsTheRunThenEveryEventFromTheFirst(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	runs := e.publishOnStart(t, 3)
	st, err := e.client.StartRunStream(withKey(ctx, keyAcme), &baagentv1.StartRunStreamRequest{Spec: &baagentv1.RunSpec{Input: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	run := first.GetRun()
	if run == nil || run.GetRunId() == "" || run.GetTenant() != "acme" {
		t.Fatalf("first message = %v, want the run of tenant acme", first)
	}
	r := <-runs
	var seqs []uint64
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := m.GetEvent()
		if ev == nil || ev.GetRunId() != run.GetRunId() {
			t.Fatalf("message %v: want an event of %s", m, run.GetRunId())
		}
		seqs = append(seqs, ev.GetSeq())
		if ev.GetSeq() == 3 { // replayed; the terminal event comes live
			if _, err := r.Complete(ctx, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []uint64{1, 2, 3, 4}; !equalSeqs(seqs, want) {
		t.Fatalf("seqs %v, want %v", seqs, want)
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStartRunStreamOverSSEIsTheRunThenTheEarliestStream: POST
// /v1/runs?stream=true is a `run` event, then byte for byte what GET
// /v1/runs/{id}/events?cursor=earliest sends.
func TestStartRunStreamOverSSEIsTheRunThenTheEarliestStream(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	runs := e.publishOnStart(t, 2)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/runs?stream=true", strings.NewReader(`{"spec":{"input":"q"}}`))
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %s, content type %q: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	c := &sseClient{resp: resp, br: bufio.NewReader(resp.Body)}
	first, err := c.next()
	if err != nil {
		t.Fatal(err)
	}
	run := &baagentv1.Run{}
	if first.event != "run" || protojson.Unmarshal([]byte(first.data), run) != nil || run.GetRunId() == "" {
		t.Fatalf("first SSE event %+v, want the run", first)
	}
	r := <-runs
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	got, err := c.all()
	if err != nil {
		t.Fatal(err)
	}
	want := e.replay(t, ctx, run.GetRunId(), "earliest")
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("got %d events, the earliest stream %d, want 3 each: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %+v, the earliest stream sends %+v", i, got[i], want[i])
		}
	}
}

// TestStartRunStreamTakesTheStreamSlotBeforeTheRunStarts: a key at its
// stream limit is refused, over gRPC and HTTP, and no run is started.
func TestStartRunStreamTakesTheStreamSlotBeforeTheRunStarts(t *testing.T) {
	e := newEnv(t, Options{MaxStreamsPerKey: 1})
	ctx := testCtx(t)
	held, err := e.client.StartRunStream(withKey(ctx, keyAcme), &baagentv1.StartRunStreamRequest{Spec: &baagentv1.RunSpec{Input: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Recv(); err != nil { // the run: the slot is held
		t.Fatal(err)
	}
	st, err := e.client.StartRunStream(withKey(ctx, keyAcme), &baagentv1.StartRunStreamRequest{Spec: &baagentv1.RunSpec{Input: "q"}})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/runs?stream=1", strings.NewReader(`{"spec":{"input":"q"}}`))
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("HTTP stream at the limit: %s, want 429", resp.Status)
	}
	e.orch.mu.Lock()
	n := e.orch.n
	e.orch.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d runs started, want 1 (refused streams start none)", n)
	}
}

func TestStartRunStreamValidatesItsInput(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	st, err := e.client.StartRunStream(withKey(ctx, keyAcme), &baagentv1.StartRunStreamRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec") {
		t.Fatalf("empty spec: %v, want InvalidArgument naming spec", err)
	}
	for _, q := range []string{"stream=maybe", "stream=true"} {
		body := `{"spec":{"input":"q"}}`
		if q == "stream=true" {
			body = `{"spec":{}}`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/runs?"+q, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		want := "stream"
		if q == "stream=true" {
			want = "spec.input"
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %s %s, want 400 naming %s", q, resp.Status, b, want)
		}
	}
	e.orch.mu.Lock()
	n := e.orch.n
	e.orch.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d runs started by invalid requests", n)
	}
}
