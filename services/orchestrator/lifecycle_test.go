package orchestrator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// blockingModel blocks every call until its context ends, after telling
// started.
func blockingModel(started chan<- struct{}) turnFunc {
	return func(ctx context.Context, _ int, _ ModelRequest) (*ModelResponse, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

func TestCancelRunStopsTheModelStream(t *testing.T) {
	ctx := testCtx(t)
	started := make(chan struct{}, 1)
	h := newHarness(t, blockingModel(started), harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "take your time"})
	<-started
	resp, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: run.GetRunId(), Reason: "user pressed stop"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetRun(); got.GetState() != baagentv1.RunState_RUN_STATE_CANCELLED || got.GetFinishedAt() == nil {
		t.Errorf("CancelRun returned %v", got)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetCancelled(); c.GetReason() != "user pressed stop" {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	// Cancelling again is a no-op that returns the run.
	again, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: run.GetRunId()})
	if err != nil || again.GetRun().GetState() != baagentv1.RunState_RUN_STATE_CANCELLED || again.GetRun().GetLastSeq() != uint64(len(evs)) {
		t.Errorf("second CancelRun: %v, %v", again.GetRun(), err)
	}
	if n := len(h.events(ctx, run.GetRunId())); n != len(evs) {
		t.Errorf("second cancel published events: %d, was %d", n, len(evs))
	}
}

func TestCancelDuringToolCall(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
		return callTools("", "call_slow", "noop", "{}"), nil
	}, harnessOptions{})
	h.tools.block = make(chan struct{}) // never closed: Invoke waits for cancellation
	run := h.start(ctx, &baagentv1.RunSpec{Input: "slow tool"})
	testkit.Eventually(t, 20*time.Second, "tool invoked", func() bool { return len(h.tools.invocations()) > 0 })
	if _, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: run.GetRunId(), Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetCancelled() == nil || slices.Contains(types(evs), "observe") {
		t.Fatalf("events %v", types(evs))
	}
}

func TestCancelQueuedAndOrphanedRuns(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) { return answer("ok"), nil }, harnessOptions{})
	// An orphan: a RUNNING record no replica executes (its replica died).
	store, err := h.srv.runStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orphan := &baagentv1.Run{RunId: newRunID(time.Now()), Tenant: testTenant, ConversationId: "c-orphan", State: baagentv1.RunState_RUN_STATE_RUNNING, LastSeq: 0}
	if err := store.Put(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: orphan.GetRunId(), Reason: "cleanup"})
	if err != nil || resp.GetRun().GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("CancelRun(orphan) = %v, %v", resp.GetRun(), err)
	}
	evs := h.events(ctx, orphan.GetRunId())
	checkEnvelope(t, orphan, evs)
	if len(evs) != 1 || evs[0].GetCancelled().GetReason() != "cleanup" {
		t.Errorf("orphan events %v", evs)
	}

	_, err = h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: "run_missing"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("CancelRun(missing) = %v", err)
	}
	// Another tenant cannot see or cancel the run.
	_, err = h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: "other", RunId: orphan.GetRunId()})
	if status.Code(err) != codes.NotFound {
		t.Errorf("CancelRun(other tenant) = %v", err)
	}
	_, err = h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: "other", RunId: orphan.GetRunId()})
	if status.Code(err) != codes.NotFound {
		t.Errorf("GetRun(other tenant) = %v", err)
	}
}

func TestShutdownHandsRunsBackToAnotherReplica(t *testing.T) {
	ctx := testCtx(t)
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	calls := 0
	// The first model call blocks until the replica stops it; the next
	// ones answer.
	h := newHarness(t, func(ctx context.Context, _ int, _ ModelRequest) (*ModelResponse, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answer("answered after the hand-over"), nil
	}, harnessOptions{mutate: func(o *Options) { o.MaxConcurrentRuns = 1 }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "one"})
	<-started
	h.stop()
	if _, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "late"}}); status.Code(err) != codes.Unavailable {
		t.Errorf("StartRun while closing = %v", err)
	}

	_, other, _ := h.replica("replica-b")
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetComplete(); c.GetContent() != "answered after the hand-over" {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	resumed := false
	for _, e := range evs {
		resumed = resumed || strings.Contains(e.GetStepStart().GetDescription(), "replica-b")
	}
	if got := types(evs); got[0] != "start" || slices.Index(got[1:], "start") >= 0 || resumed {
		// One start event; the step had not reached its checkpoint, so
		// replica-b runs it afresh (not as a resumed step).
		t.Errorf("events %v", got)
	}
	// The record is stored after the terminal event: poll it.
	final := h.waitRun(ctx, run.GetRunId())
	if final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || final.GetLastSeq() != uint64(len(evs)) {
		t.Errorf("record %v", final)
	}
	if _, err := other.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: run.GetRunId()}); err != nil {
		t.Errorf("GetRun on replica-b: %v", err)
	}
}

func TestStartRunLimitsAndIdempotency(t *testing.T) {
	ctx := testCtx(t)
	started := make(chan struct{}, 8)
	h := newHarness(t, blockingModel(started), harnessOptions{mutate: func(o *Options) { o.MaxConcurrentRuns, o.MaxRunsPerTenant, o.MaxQueuedRuns = 1, 2, 3 }})
	spec := &baagentv1.RunSpec{Input: "same", IdempotencyKey: "req-42"}
	first := h.start(ctx, spec)
	second := h.start(ctx, spec)
	if first.GetRunId() != second.GetRunId() {
		t.Fatalf("idempotency key gave runs %s and %s", first.GetRunId(), second.GetRunId())
	}
	h.start(ctx, &baagentv1.RunSpec{Input: "reaches the tenant's limit"})
	_, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "one too many"}})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "tenant") {
		t.Fatalf("StartRun over the tenant's limit = %v", err)
	}
	// The same key in another tenant is another run; a fourth run overall
	// exceeds the queue's limit.
	other, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: "other", Spec: spec})
	if err != nil || other.GetRun().GetRunId() == first.GetRunId() {
		t.Errorf("other tenant: %v, %v", other, err)
	}
	_, err = h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: "third", Spec: &baagentv1.RunSpec{Input: "x"}})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "queue") {
		t.Fatalf("StartRun over the queue's limit = %v", err)
	}
	// Cancelling a run frees its place.
	if _, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: first.GetRunId()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "StartRun accepted after a cancel", func() bool {
		_, err = h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "fits again"}})
		return err == nil
	})
}

func TestListRuns(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		return answer("done"), nil
	}, harnessOptions{})
	var ids []string
	for i := range 5 {
		conv := "conv-a"
		if i%2 == 1 {
			conv = "conv-b"
		}
		r := h.start(ctx, &baagentv1.RunSpec{Input: "q", ConversationId: conv})
		ids = append(ids, r.GetRunId())
		h.waitRun(ctx, r.GetRunId())
		time.Sleep(2 * time.Millisecond) // run ids order by millisecond
	}
	slices.Reverse(ids) // newest first

	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		resp, err := h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant, PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetRuns() {
			got = append(got, r.GetRunId())
		}
		tok = resp.GetNextPageToken()
		if tok == "" {
			if pages != 2 {
				t.Errorf("%d pages", pages+1)
			}
			break
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged list\n got %v\nwant %v", got, ids)
	}
	resp, err := h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant, ConversationId: "conv-b", States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_COMPLETED}})
	if err != nil || len(resp.GetRuns()) != 2 || resp.GetRuns()[0].GetRunId() != ids[1] || resp.GetNextPageToken() != "" {
		t.Errorf("filtered list = %v, %v", resp, err)
	}
	resp, err = h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant, States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_RUNNING}})
	if err != nil || len(resp.GetRuns()) != 0 {
		t.Errorf("running list = %v, %v", resp, err)
	}
	resp, err = h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: "nobody"})
	if err != nil || len(resp.GetRuns()) != 0 {
		t.Errorf("empty tenant = %v, %v", resp, err)
	}
	_, err = h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: "run_nope"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "run_nope") {
		t.Errorf("GetRun(missing) = %v", err)
	}
}

func TestContextCompressedEvent(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		if n < 2 {
			return callTools("", "call_"+string(rune('a'+n)), "noop", "{}"), nil
		}
		return answer("done"), nil
	}, harnessOptions{})
	h.ctxSvc.compressAbove = 2
	run := h.start(ctx, &baagentv1.RunSpec{Input: "long"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	n := 0
	for _, e := range evs {
		if c := e.GetContextCompressed(); c != nil {
			n++
			if !c.GetWasCompressed() || c.GetCompressionStrategy() != "truncate" {
				t.Errorf("context_compressed = %v", c)
			}
		}
	}
	// Windows of steps 2 and 3 hold 3 and 5 history messages.
	if n != 2 || evs[len(evs)-1].GetComplete().GetMetrics().GetCompressionEvents() != 2 {
		t.Errorf("%d context_compressed events; %v", n, types(evs))
	}
	for _, inv := range h.tools.invocations() {
		if inv.GetToolCallId() == "call_b" && inv.GetContextUsage() != 0.85 {
			t.Errorf("context usage of call_b = %v", inv.GetContextUsage())
		}
	}
}

func TestCancelReachesTheExecutingReplicaWithinASecond(t *testing.T) {
	ctx := testCtx(t)
	started := make(chan struct{}, 1)
	h := newHarness(t, blockingModel(started), harnessOptions{})
	otherSrv, other, _ := h.replica("replica-b")
	run := h.start(ctx, &baagentv1.RunSpec{Input: "take your time"})
	<-started
	// Cancel through the replica that does not execute the run.
	client := h.client
	if h.srv.local(run.GetRunId()) != nil {
		client = other
	} else if otherSrv.local(run.GetRunId()) == nil {
		t.Fatal("no replica executes the run")
	}
	began := time.Now()
	resp, err := client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: run.GetRunId(), Reason: "from elsewhere"})
	took := time.Since(began)
	if err != nil || resp.GetRun().GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("CancelRun = %v, %v", resp.GetRun(), err)
	}
	if took > time.Second {
		t.Errorf("cross-replica cancel took %s", took)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetCancelled().GetReason() != "from elsewhere" {
		t.Errorf("events %v", types(evs))
	}
}
