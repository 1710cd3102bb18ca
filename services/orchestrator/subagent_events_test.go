package orchestrator

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
)

// mirroredOf returns the events of evs mirrored from child.
func mirroredOf(evs []*baagentv1.Event, child string) []*baagentv1.Event {
	var out []*baagentv1.Event
	for _, e := range evs {
		if e.GetSubagentRunId() == child {
			out = append(out, e)
		}
	}
	return out
}

// payloadOf is ev without its envelope, to compare a copy with its original.
func payloadOf(ev *baagentv1.Event) *baagentv1.Event {
	return &baagentv1.Event{Type: ev.GetType(), Step: ev.GetStep(), Ts: ev.GetTs(), Payload: proto.CloneOf(ev).Payload}
}

// checkMirrored asserts that parentEvs holds, once each and in order, every
// event of childEvs but the deltas, and that the child's copies sit
// between the subagent_assigned event and the task call's observation.
func checkMirrored(t *testing.T, parentEvs, childEvs []*baagentv1.Event, child string) {
	t.Helper()
	var want []*baagentv1.Event
	for _, e := range childEvs {
		if !runevent.IsDelta(e) {
			want = append(want, e)
		}
	}
	got := mirroredOf(parentEvs, child)
	if len(got) != len(want) {
		t.Fatalf("%d events of %s mirrored, want %d: %v, want %v", len(got), child, len(want), types(got), types(want))
	}
	for i := range got {
		if !proto.Equal(payloadOf(got[i]), payloadOf(want[i])) {
			t.Errorf("mirrored event %d = %v, want the child's %v", i, got[i], want[i])
		}
	}
	assigned := slices.IndexFunc(parentEvs, func(e *baagentv1.Event) bool { return e.GetSubagentAssigned().GetChildRunId() == child })
	first := slices.IndexFunc(parentEvs, func(e *baagentv1.Event) bool { return e.GetSubagentRunId() == child })
	last := -1
	for i, e := range parentEvs {
		if e.GetSubagentRunId() == child {
			last = i
		}
	}
	observed := slices.IndexFunc(parentEvs, func(e *baagentv1.Event) bool {
		return e.GetSubagentRunId() == "" && e.GetObserve().GetToolName() == TaskToolName && contains(e.GetObserve().GetObservation(), child)
	})
	// The child's end (its terminal event, mirrored) comes before the
	// parent goes on with its report.
	if assigned < 0 || first < assigned || observed < 0 || last > observed {
		t.Errorf("subagent_assigned at %d, mirrored events at %d..%d, task observation at %d: %v", assigned, first, last, observed, types(parentEvs))
	}
}

func TestSubAgentEventsMirroredIntoParent(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, nil)
	parent, evs, kids := h.delegated(ctx, "which category sells best?", 1)
	child := h.waitRun(ctx, kids[0].GetRunId())
	cevs := h.events(ctx, child.GetRunId())
	checkMirrored(t, evs, cevs, child.GetRunId())
	// The child's complete is in the parent's stream, and is not the
	// parent's end.
	got := mirroredOf(evs, child.GetRunId())
	if end := got[len(got)-1]; end.GetComplete() == nil || runevent.IsTerminal(end) {
		t.Errorf("last mirrored event %v", end)
	}
	// The parent's record names its last event, mirrored ones counted.
	if rec := h.waitRun(ctx, parent.GetRunId()); rec.GetLastSeq() != uint64(len(evs)) {
		t.Errorf("parent record last_seq %d, %d events", rec.GetLastSeq(), len(evs))
	}
}

func TestParallelSubAgentEventsMirrored(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, parallelTasks, nil)
	_, evs, kids := h.delegated(ctx, "compare north and south", 2)
	for _, k := range kids {
		child := h.waitRun(ctx, k.GetRunId())
		checkMirrored(t, evs, h.events(ctx, child.GetRunId()), child.GetRunId())
	}
}

// storedEvents returns the run's events stored so far.
func (h *harness) storedEvents(ctx context.Context, runID string) []*baagentv1.Event {
	h.t.Helper()
	subject, err := natsx.EventSubject(testTenant, runID)
	if err != nil {
		h.t.Fatal(err)
	}
	stream, err := h.js.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*baagentv1.Event
	err = publish.Walk(ctx, stream, subject, 0, func(m *jetstream.RawStreamMsg) bool {
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(m.Data, ev); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, ev)
		return true
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// A child handed over to another replica mid-step (its replica shuts
// down while its query runs) goes on mirroring after what the first
// replica mirrored: every child event once in the parent's stream.
func TestSubAgentEventsMirroredOnceAcrossAHandOver(t *testing.T) {
	ctx := testCtx(t)
	h := subAgentHarness(t, delegating, nil)
	release := h.blockTools() // the child's query hangs
	parent := h.start(ctx, &baagentv1.RunSpec{Input: "which category sells best?"})
	child := h.waitChild(ctx, parent.GetRunId())
	testkit.Eventually(t, remaining(ctx), "the child's act mirrored", func() bool {
		for _, e := range h.storedEvents(ctx, parent.GetRunId()) {
			if e.GetSubagentRunId() == child.GetRunId() && e.GetAct() != nil {
				return true
			}
		}
		return false
	})
	h.stop() // the child's replica hands it back mid-call
	release()
	h.replica("replica-b")
	evs := h.events(ctx, parent.GetRunId())
	checkEnvelope(t, parent, evs)
	ended := h.waitRun(ctx, child.GetRunId())
	if ended.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("child %v", ended)
	}
	cevs := h.events(ctx, child.GetRunId())
	checkEnvelope(t, child, cevs)
	checkMirrored(t, evs, cevs, child.GetRunId())
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, "Parent answer.", "Report: Found 2 rows") {
		t.Errorf("final %q", c)
	}
}
