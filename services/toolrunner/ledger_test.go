package toolrunner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// gatedWrite is a tool with side effects that blocks until released and
// counts its executions; started is closed when the first one begins.
type gatedWrite struct {
	*funcTool
	started chan struct{}
	release chan struct{}
}

func newGatedWrite(name string) *gatedWrite {
	g := &gatedWrite{started: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	spec := echoSpec(name)
	spec.ReadOnly = false
	g.funcTool = &funcTool{spec: spec, fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		once.Do(func() { close(g.started) })
		select {
		case <-g.release:
			return tool.Result{Data: "appended " + c.Args["x"].(string)}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}}
	return g
}

func keyed(name, key, callID string) *baagentv1.ToolInvocationRequest {
	r := req(name, map[string]any{"x": "line"})
	r.IdempotencyKey, r.ToolCallId = key, callID
	return r
}

func wait(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		tb.Fatalf("%s: not within 10s", what)
	}
}

// The caller going away (its orchestrator replica was killed) does not
// abandon a call with side effects: it runs to its end, its outcome is
// recorded, and the resumed caller's retry with the same key is answered
// from the record.
func TestKeyedCallOutlivesItsCaller(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	w := newGatedWrite("append")
	env.source.set(w)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Invoke(ctx, &baagentv1.InvokeRequest{Request: keyed("append", "run-1:s1:c0", "call_a")})
		errc <- err
	}()
	wait(t, w.started, "the tool started")
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("Invoke after the caller left: %v, want Canceled", err)
	}
	close(w.release)

	retry := mustInvoke(t, s, keyed("append", "run-1:s1:c0", "call_a"))
	if !retry.Success || !retry.Replayed || w.calls.Load() != 1 {
		t.Fatalf("retry after the caller left: %v (executions %d), want the recorded outcome of one execution", retry, w.calls.Load())
	}
	// The detached call counts itself just after it records the outcome
	// the retry was answered from.
	executed := s.metrics.keyed.WithLabelValues(keyedExecuted)
	testkit.Eventually(t, 10*time.Second, "the executed metric to reach 1", func() bool { return testutil.ToFloat64(executed) == 1 })
}

// Two replicas share the records: a retry that lands on the other
// replica while the first still runs the call waits for its outcome.
func TestKeyedCallOnAnotherReplicaWaitsForTheOutcome(t *testing.T) {
	t.Parallel()

	records := idempotency.NewMemory(nil, time.Hour, 100)
	share := func(o *Options) { o.Records, o.Heartbeat, o.Lease = records, 20*time.Millisecond, 2*time.Second }
	a, envA := newTestServer(t, share)
	b, envB := newTestServer(t, share)
	w := newGatedWrite("append")
	envA.source.set(w)
	envB.source.set(w)

	first := make(chan *baagentv1.ToolExecutionResult, 1)
	go func() { first <- mustInvoke(t, a, keyed("append", "k", "call_1")) }()
	wait(t, w.started, "the tool started on replica a")
	second := make(chan *baagentv1.ToolExecutionResult, 1)
	go func() { second <- mustInvoke(t, b, keyed("append", "k", "call_1")) }()
	// Replica b waits through several heartbeats of a's execution.
	testkit.Eventually(t, 10*time.Second, "heartbeats", func() bool {
		e, err := records.Get(context.Background(), idempotency.ConversationKey("acme", "conv-1", "k"))
		return err == nil && e.HeartbeatAt.Sub(e.StartedAt) > 100*time.Millisecond
	})
	close(w.release)
	ra, rb := <-first, <-second
	if !ra.Success || ra.Replayed || !rb.Success || !rb.Replayed || ra.Observation != rb.Observation || w.calls.Load() != 1 {
		t.Fatalf("a: %v\nb: %v\nexecutions %d", ra, rb, w.calls.Load())
	}
}

// A record started by a toolrunner that died mid-call has no heartbeat:
// a retry gets TOOL_OUTCOME_UNKNOWN after the lease, never a second
// execution, and every later retry the same answer at once.
func TestKeyedCallOfADeadReplicaIsUnknown(t *testing.T) {
	t.Parallel()

	records := idempotency.NewMemory(nil, time.Hour, 100)
	s, env := newTestServer(t, func(o *Options) { o.Records, o.Heartbeat, o.Lease = records, 20*time.Millisecond, 200*time.Millisecond })
	w := newGatedWrite("append")
	close(w.release)
	env.source.set(w)

	r := keyed("append", "k", "call_1")
	spec := w.Spec()
	now := time.Now()
	if _, err := records.Create(context.Background(), idempotency.ConversationKey("acme", "conv-1", "k"), idempotency.Record{
		State: idempotency.Started, Fingerprint: derivedKey(r, spec, r.GetParameters().AsMap()), Holder: "dead/1", Tool: "append", StartedAt: now, HeartbeatAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res := mustInvoke(t, s, r)
		if res.Success || res.ErrorCode != codeOutcomeUnknown || !res.Replayed {
			t.Fatalf("retry %d: %v, want %s", i, res, codeOutcomeUnknown)
		}
	}
	if w.calls.Load() != 0 {
		t.Fatalf("the tool ran %d times after its first execution died", w.calls.Load())
	}
	e, err := records.Get(context.Background(), idempotency.ConversationKey("acme", "conv-1", "k"))
	if err != nil || e.State != idempotency.Done {
		t.Fatalf("record after the lease: %+v, %v; want done", e, err)
	}
}

// A key sent again for another call is refused; nothing runs.
func TestKeyedCallKeyReusedForAnotherCall(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, nil)
	w := newGatedWrite("append")
	close(w.release)
	env.source.set(w)
	mustInvoke(t, s, keyed("append", "k", "call_1"))
	other := keyed("append", "k", "call_2")
	other.Parameters.Fields["x"] = structValue("another line")
	if res := mustInvoke(t, s, other); res.ErrorCode != codeKeyReused || w.calls.Load() != 1 {
		t.Fatalf("reused key: %v (executions %d)", res, w.calls.Load())
	}
}

// failingStore is a record store that cannot be reached.
type failingStore struct{}

var errStoreDown = errors.New("nats: no responders")

func (failingStore) Get(context.Context, string) (idempotency.Entry, error) {
	return idempotency.Entry{}, errStoreDown
}
func (failingStore) Create(context.Context, string, idempotency.Record) (uint64, error) {
	return 0, errStoreDown
}
func (failingStore) Update(context.Context, string, idempotency.Record, uint64) (uint64, error) {
	return 0, errStoreDown
}

// Without a record there is no execution: the call is refused with a
// retryable error that says nothing ran.
func TestKeyedCallRefusedWithoutARecord(t *testing.T) {
	t.Parallel()

	s, env := newTestServer(t, func(o *Options) { o.Records = failingStore{} })
	w := newGatedWrite("append")
	close(w.release)
	env.source.set(w)
	res := mustInvoke(t, s, keyed("append", "k", "call_1"))
	if res.Success || res.ErrorCode != codeRecordUnavailable || res.ErrorType != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR || w.calls.Load() != 0 {
		t.Fatalf("%v (executions %d)", res, w.calls.Load())
	}
	// A read-only call needs no record.
	env.source.set(&funcTool{spec: echoSpec("read"), fn: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{Data: "ok"}, nil }})
	if res := mustInvoke(t, s, keyed("read", "k2", "call_2")); !res.Success {
		t.Fatalf("read-only call: %v", res)
	}
}

// A call still running at shutdown gets the drain timeout, then is
// cancelled and recorded with an unknown outcome.
func TestShutdownRecordsCallsCutShort(t *testing.T) {
	t.Parallel()

	records := idempotency.NewMemory(nil, time.Hour, 100)
	s, env := newTestServer(t, func(o *Options) { o.Records, o.DrainTimeout = records, 50*time.Millisecond })
	w := newGatedWrite("append")
	env.source.set(w)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = s.Invoke(ctx, &baagentv1.InvokeRequest{Request: keyed("append", "k", "call_1")}) }()
	wait(t, w.started, "the tool started")
	cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := records.Get(context.Background(), idempotency.ConversationKey("acme", "conv-1", "k"))
	if err != nil || e.State != idempotency.Done {
		t.Fatalf("record after shutdown: %+v, %v", e, err)
	}
	s2, _ := newTestServer(t, func(o *Options) { o.Records = records; o.Sources = []tool.Source{env.source} })
	if res := mustInvoke(t, s2, keyed("append", "k", "call_1")); res.ErrorCode != codeOutcomeUnknown || w.calls.Load() != 1 {
		t.Fatalf("retry after a shutdown cut the call short: %v (executions %d)", res, w.calls.Load())
	}
}

// ReleaseConversation removes the idempotency records of the calls made in
// the conversation (their keys carry its tag) and no other's; a call sent
// again after the release runs again.
func TestReleaseConversationPurgesIdempotencyRecords(t *testing.T) {
	t.Parallel()

	records := idempotency.NewMemory(nil, time.Hour, 100)
	s, env := newTestServer(t, func(o *Options) { o.Records = records })
	w := newGatedWrite("append")
	close(w.release)
	env.source.set(w)

	mine := keyed("append", "k", "call_1")
	other := keyed("append", "k", "call_1")
	other.ConversationId = "conv-2"
	for _, r := range []*baagentv1.ToolInvocationRequest{mine, other} {
		if res := mustInvoke(t, s, r); !res.Success {
			t.Fatalf("%s: %v", r.GetConversationId(), res)
		}
	}
	if records.Len() != 2 {
		t.Fatalf("%d records, want one per conversation", records.Len())
	}
	if _, err := s.ReleaseConversation(context.Background(), &baagentv1.ReleaseConversationRequest{Tenant: "acme", ConversationId: "conv-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := records.Get(context.Background(), idempotency.ConversationKey("acme", "conv-1", "k")); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the released conversation's record: %v, want not found", err)
	}
	if _, err := records.Get(context.Background(), idempotency.ConversationKey("acme", "conv-2", "k")); err != nil {
		t.Fatalf("another conversation's record: %v", err)
	}
	if res := mustInvoke(t, s, mine); !res.Success || res.Replayed || w.calls.Load() != 3 {
		t.Fatalf("after the release: %v, executions %d; want a fresh execution", res, w.calls.Load())
	}
}
