package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

// TestGetRunReportsAStoredTerminalEventBeforeTheRecord: the record is
// written just after the terminal event, so for a moment (or, after a
// crash, until the run is resumed) a record says RUNNING while its events
// say it ended. GetRun must follow the events: a client that saw
// `complete` never reads RUNNING afterwards.
func TestGetRunReportsAStoredTerminalEventBeforeTheRecord(t *testing.T) {
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
		t.Error("no run is started in this test")
		return nil, nil
	}, harnessOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store, err := h.srv.runStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	put := func(runID string, events ...*baagentv1.Event) {
		t.Helper()
		rec := &baagentv1.Run{RunId: runID, ConversationId: "conv_" + runID, Tenant: testTenant, State: baagentv1.RunState_RUN_STATE_RUNNING, Step: 1, LastSeq: 1}
		if err := store.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		subject, err := natsx.EventSubject(testTenant, runID)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range events {
			ev.RunId, ev.Tenant, ev.Seq = runID, testTenant, uint64(i+1)
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
	}
	getRun := func(runID string) *baagentv1.Run {
		t.Helper()
		resp, err := h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: runID})
		if err != nil {
			t.Fatalf("GetRun(%s): %v", runID, err)
		}
		return resp.GetRun()
	}
	start := &baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "thinking"}}}

	put("run_completed", start, &baagentv1.Event{Ts: timestamppb.New(ended), Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "the answer"}}})
	got := getRun("run_completed")
	if got.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || got.GetFinalAnswer() != "the answer" || got.GetLastSeq() != 2 || !got.GetFinishedAt().AsTime().Equal(ended) {
		t.Errorf("completed run read as %v", got)
	}

	put("run_failed", start, &baagentv1.Event{Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: "MODEL_UNAVAILABLE", Message: "gone"}}})
	if got := getRun("run_failed"); got.GetState() != baagentv1.RunState_RUN_STATE_FAILED || got.GetError().GetCode() != "MODEL_UNAVAILABLE" {
		t.Errorf("failed run read as %v", got)
	}

	put("run_going", start)
	if got := getRun("run_going"); got.GetState() != baagentv1.RunState_RUN_STATE_RUNNING || got.GetFinalAnswer() != "" {
		t.Errorf("running run read as %v", got)
	}
}
