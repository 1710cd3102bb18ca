package hub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Two framings as transports might give them, one of lines (like SSE) and
// one length-prefixed (like WebSocket): the hub must hand out and write
// each as rendered, whatever its bytes.
var testFramings = []Framing{
	func(dst []byte, e *Entry) []byte {
		dst = append(dst, "id: "...)
		dst = append(dst, e.Cursor...)
		dst = append(dst, "\ndata: "...)
		dst = append(dst, e.JSON...)
		return append(dst, '\n', '\n')
	},
	func(dst []byte, e *Entry) []byte {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.JSON)))
		return append(dst, e.JSON...)
	},
}

const (
	framingLines  = 0
	framingLength = 1
)

func newHub(t *testing.T, js jetstream.JetStream, opts Options) *Hub {
	t.Helper()
	opts.JetStream = js
	if opts.Framings == nil {
		opts.Framings = testFramings
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func publishTexts(t *testing.T, ctx context.Context, r *natstest.Run, n int) {
	t.Helper()
	for i := range n {
		if _, err := r.Text(ctx, fmt.Sprintf("chunk %d ", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func subscribe(t *testing.T, ctx context.Context, h *Hub, r *natstest.Run, cursor string) *Subscription {
	t.Helper()
	s, err := h.Subscribe(ctx, Request{Tenant: r.Tenant, RunID: r.RunID, Cursor: cursor, Transport: TransportSSE})
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", cursor, err)
	}
	t.Cleanup(s.Close)
	return s
}

// collect reads until EOF and returns the seqs and types (resets as
// "reset:<earliest>:<reason>").
func collect(t *testing.T, ctx context.Context, s *Subscription) []string {
	t.Helper()
	got, err := drain(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// drain is collect for goroutines other than the test's.
func drain(ctx context.Context, s *Subscription) ([]string, error) {
	return drainProgress(ctx, s, nil)
}

// drainProgress is drain that publishes the last seq read to progress.
func drainProgress(ctx context.Context, s *Subscription, progress *atomic.Uint64) ([]string, error) {
	var got []string
	for {
		it, err := s.Next(ctx)
		if err == nil && progress != nil && it.Seq > 0 {
			progress.Store(it.Seq)
		}
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, fmt.Errorf("Next after %v: %w", got, err)
		}
		if it.Type == TypeStreamReset {
			got = append(got, fmt.Sprintf("reset:%d:%s", it.Event.GetStreamReset().GetEarliestSeq(), it.Event.GetStreamReset().GetReason()))
			continue
		}
		got = append(got, fmt.Sprint(it.Seq))
	}
}

// drainAsync drains s in a goroutine; the result is checked with wantAsync.
func drainAsync(ctx context.Context, s *Subscription, progress *atomic.Uint64) <-chan result {
	c := make(chan result, 1)
	go func() {
		got, err := drainProgress(ctx, s, progress)
		c <- result{got, err}
	}()
	return c
}

// publishPaced publishes n text events of size bytes, never more than
// ahead events past what the reader has read (progress), so that a reader
// on a loaded machine is not itself a slow consumer.
func publishPaced(t *testing.T, ctx context.Context, r *natstest.Run, n, size int, progress *atomic.Uint64, ahead uint64) {
	t.Helper()
	body := strings.Repeat("x", size)
	for range n {
		for r.Seq() > progress.Load()+ahead {
			select {
			case <-ctx.Done():
				t.Fatalf("reader stuck at %d", progress.Load())
			case <-time.After(time.Millisecond):
			}
		}
		if _, err := r.Text(ctx, body); err != nil {
			t.Fatal(err)
		}
	}
}

type result struct {
	got []string
	err error
}

func wantAsync(t *testing.T, c <-chan result, want []string) {
	t.Helper()
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantSeq(t, r.got, want)
}

func seqs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func wantSeq(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestReplayHandsOverToLiveWithoutGapOrDuplicate(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-1")
	publishTexts(t, ctx, r, 20)

	earliest := subscribe(t, ctx, h, r, Earliest)
	after7 := subscribe(t, ctx, h, r, "7")
	live := subscribe(t, ctx, h, r, "")

	// Publish the rest while the subscribers replay.
	errc := make(chan error, 1)
	go func() {
		for i := range 80 {
			if _, err := r.Text(ctx, fmt.Sprint(i)); err != nil {
				errc <- err
				return
			}
		}
		_, err := r.Complete(ctx, "done")
		errc <- err
	}()
	wantSeq(t, collect(t, ctx, earliest), seqs(1, 101))
	wantSeq(t, collect(t, ctx, after7), seqs(8, 101))
	wantSeq(t, collect(t, ctx, live), seqs(21, 101))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n := h.Feeds(); n != 1 {
		t.Errorf("feeds = %d, want one shared by all viewers", n)
	}
	// A subscriber after the end: the terminal event only, then EOF; a live
	// one: EOF at once.
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "100")), []string{"101"})
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "")), nil)
}

func TestEventsCarryJSONWithProtoNames(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-json")
	if _, err := r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call_1", ToolName: "sql_query"}}}); err != nil {
		t.Fatal(err)
	}
	it, err := subscribe(t, ctx, h, r, Earliest).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"run_id":"run-json"`, `"tool_call_id":"call_1"`, `"type":"act"`, `"cursor":"1"`} {
		if !strings.Contains(string(it.JSON), want) {
			t.Errorf("JSON %s lacks %s", it.JSON, want)
		}
	}
	if it.Cursor != "1" || it.Type != "act" {
		t.Errorf("cursor %q type %q", it.Cursor, it.Type)
	}
}

func TestExpiredCursorGetsStreamReset(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	r := natstest.NewRun(js, "acme", "run-old")
	var streamSeqs []uint64
	for i := range 10 {
		sq, err := r.Text(ctx, fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		streamSeqs = append(streamSeqs, sq)
	}
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	// Retention drops events 1..5.
	st, err := js.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := natsx.EventSubject("acme", "run-old")
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(streamSeqs[5])); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := newHub(t, js, Options{Registerer: reg})

	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "2")), append([]string{"reset:6:cursor expired"}, seqs(6, 11)...))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "5")), seqs(6, 11))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, Earliest)), seqs(6, 11))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "x y")), append([]string{"reset:6:cursor invalid"}, seqs(6, 11)...))
	if got := testutil.ToFloat64(h.m.replays.WithLabelValues("reset")); got != 2 {
		t.Errorf("reset replays = %v, want 2", got)
	}

	// The reset's cursor resumes at the earliest retained event.
	s := subscribe(t, ctx, h, r, "1")
	it, err := s.Next(ctx)
	if err != nil || it.Type != TypeStreamReset {
		t.Fatalf("first item %v %v", it.Entry, err)
	}
	if it.Cursor != "5" || it.Event.GetStreamReset().GetEarliestCursor() != "5" || it.Event.GetStreamReset().GetRequestedCursor() != "1" {
		t.Errorf("reset = %v", it.Event)
	}
}

func TestEndedRunWithNothingRetained(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	s, err := h.Subscribe(ctx, Request{Tenant: "acme", RunID: "gone", Cursor: "3", Transport: TransportGRPC, RunEnded: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantSeq(t, collect(t, ctx, s), []string{"reset:0:events expired"})
}

func TestSlowConsumerIsCutOthersUnaffected(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	reg := prometheus.NewRegistry()
	h := newHub(t, js, Options{SendQueueBytes: 64 << 10, Registerer: reg})
	r := natstest.NewRun(js, "acme", "run-slow")
	if _, err := r.Text(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	stalled := subscribe(t, ctx, h, r, "")
	reader := subscribe(t, ctx, h, r, "")

	var progress atomic.Uint64
	done := drainAsync(ctx, reader, &progress)
	publishPaced(t, ctx, r, 200, 1000, &progress, 5)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	wantAsync(t, done, seqs(2, 202))

	// The stalled client reads what it had queued, then is cut.
	var err error
	for err == nil {
		_, err = stalled.Next(ctx)
	}
	if !IsSlowConsumer(err) {
		t.Fatalf("stalled client ended with %v, want slow consumer", err)
	}
	if got := testutil.ToFloat64(h.m.slow.WithLabelValues(TransportSSE, SlowQueue)); got != 1 {
		t.Errorf("slow consumer disconnects = %v", got)
	}
	// It loses nothing: resuming from its last cursor works.
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "1")), seqs(2, 202))
}

func TestOldEventsReplayFromJetStreamBeyondTheBuffer(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{SendQueueBytes: 32 << 10, FeedBufferBytes: 64 << 10})
	r := natstest.NewRun(js, "acme", "run-long")
	live := subscribe(t, ctx, h, r, Earliest)
	var progress atomic.Uint64
	done := drainAsync(ctx, live, &progress)
	publishPaced(t, ctx, r, 300, 100, &progress, 5)
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	wantAsync(t, done, seqs(1, 301))
	h.m.replays.WithLabelValues("jetstream_catchup")
	before := testutil.ToFloat64(h.m.replays.WithLabelValues("jetstream_catchup"))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, Earliest)), seqs(1, 301))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "150")), seqs(151, 301))
	if after := testutil.ToFloat64(h.m.replays.WithLabelValues("jetstream_catchup")); after < before+2 {
		t.Errorf("catch-ups %v -> %v; the buffer should not reach back to seq 1", before, after)
	}
}

func TestDuplicateSeqIsDeliveredOnce(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-dup")
	publishTexts(t, ctx, r, 3)
	// A second publisher replays seq 2 and 3 under other message ids (as a
	// replica taking over might): they must not reach clients twice.
	dup := natstest.NewRun(js, "acme", "run-dup")
	publishTexts(t, ctx, dup, 3)
	publishTexts(t, ctx, r, 1)
	if _, err := r.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, Earliest)), seqs(1, 5))
}

func TestIdleFeedsAreReleased(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{IdleTimeout: 50 * time.Millisecond})
	r := natstest.NewRun(js, "acme", "run-idle")
	publishTexts(t, ctx, r, 1)
	s := subscribe(t, ctx, h, r, Earliest)
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.Watching("acme", "run-idle") || h.Watching("other", "run-idle") {
		t.Fatal("Watching is wrong")
	}
	s.Close()
	for h.Feeds() != 0 {
		select {
		case <-ctx.Done():
			t.Fatal("idle feed was not released")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A new subscriber starts a new feed and still gets everything.
	publishTexts(t, ctx, r, 1)
	if _, err := r.Complete(ctx, ""); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, "0")), seqs(1, 3))
}

func TestMaxFeedsAndClose(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{MaxFeeds: 1})
	a := subscribe(t, ctx, h, natstest.NewRun(js, "acme", "a"), "")
	if _, err := h.Subscribe(ctx, Request{Tenant: "acme", RunID: "b", Transport: TransportWS}); !errors.Is(err, ErrTooManyFeeds) {
		t.Fatalf("second run: %v, want ErrTooManyFeeds", err)
	}
	a.Close()
	// The idle feed is evicted for the new one.
	subscribe(t, ctx, h, natstest.NewRun(js, "acme", "b"), "")
	for _, bad := range []Request{{Tenant: "a.b", RunID: "x", Transport: TransportSSE}, {Tenant: "a", RunID: "*", Transport: TransportSSE}, {Tenant: "a", RunID: "x", Transport: "smoke"}} {
		if _, err := h.Subscribe(ctx, bad); err == nil {
			t.Errorf("Subscribe(%+v) accepted", bad)
		}
	}
	s := subscribe(t, ctx, h, natstest.NewRun(js, "acme", "b"), "")
	h.Close()
	if _, err := s.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := h.Subscribe(ctx, Request{Tenant: "acme", RunID: "c", Transport: TransportSSE}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

func textEvent(s string) *baagentv1.Event {
	return &baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: s}}}
}

func TestEventStoredAheadOfAMissingOneIsHeldBack(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{ReorderWait: 20 * time.Second})
	r := natstest.NewRun(js, "acme", "run-reorder")
	publishTexts(t, ctx, r, 1)
	s := subscribe(t, ctx, h, r, Earliest)
	if it, err := s.Next(ctx); err != nil || it.Seq != 1 {
		t.Fatalf("first: %v %v", it.Entry, err)
	}
	// As during the orchestrator's repair: 3 is stored before 2, then
	// deleted and stored again after it.
	for _, seq := range []uint64{3, 2, 3} {
		if _, err := r.PublishAt(ctx, seq, textEvent(fmt.Sprint(seq))); err != nil {
			t.Fatal(err)
		}
	}
	publishTexts(t, ctx, r, 3) // seq 2..4 under the run's own counter: 2 and 3 are deduped
	if _, err := r.Complete(ctx, ""); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, collect(t, ctx, s), seqs(2, 5))
}

func TestGapIsAcceptedAfterReorderWait(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{ReorderWait: 50 * time.Millisecond})
	r := natstest.NewRun(js, "acme", "run-gap")
	publishTexts(t, ctx, r, 1)
	s := subscribe(t, ctx, h, r, "0")
	for _, seq := range []uint64{3, 4} {
		if _, err := r.PublishAt(ctx, seq, textEvent("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.PublishAt(ctx, 5, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{}}}); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, collect(t, ctx, s), []string{"1", "reset:3:cursor expired", "3", "4", "5"})
}

// A sub-agent's complete mirrored into its parent's stream (tagged with
// subagent_run_id) does not end the parent's stream: viewers go on to the
// parent's own terminal event, live and in replay.
func TestMirroredSubAgentEndDoesNotEndTheStream(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	js, _ := natstest.JetStream(t)
	h := newHub(t, js, Options{})
	r := natstest.NewRun(js, "acme", "run-parent")
	publishTexts(t, ctx, r, 2)
	live := subscribe(t, ctx, h, r, "")
	if _, err := r.Publish(ctx, &baagentv1.Event{SubagentRunId: "run-child", Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "child report"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(ctx, "after the child"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, collect(t, ctx, live), seqs(3, 5))
	wantSeq(t, collect(t, ctx, subscribe(t, ctx, h, r, Earliest)), seqs(1, 5))
}
