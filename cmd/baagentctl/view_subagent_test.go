package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

const childID = "run_00000190aa00_0123456789abcdef"

// A delegating run's stream: the delegation, the child's events (tagged),
// the child's end, then the parent's own end.
func delegatingStream() []*baagentv1.Event {
	evs := []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m"}}},
		{Payload: &baagentv1.Event_SubagentAssigned{SubagentAssigned: &baagentv1.SubagentAssignedPayload{
			ChildRunId: childID, SubagentType: "data-analyst", Description: "revenue by category",
		}}},
		{SubagentRunId: childID, Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m", MaxSteps: 8}}},
		{SubagentRunId: childID, Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolName: "sql_query", RawArguments: "x", ToolCallId: "c_sql"}}},
		{SubagentRunId: childID, Payload: &baagentv1.Event_DecisionAsked{DecisionAsked: &baagentv1.DecisionPoint{DecisionId: "d1", Context: "Which year?"}}},
		{SubagentRunId: childID, Step: 2, Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "Report: Electronics"}}},
		{Payload: &baagentv1.Event_DoomLoopIntervened{DoomLoopIntervened: &baagentv1.DoomLoopIntervenedPayload{
			ToolName: "noop", Choice: "continue", Intervention: baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE,
		}}},
		{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "Parent answer"}}},
	}
	for i, e := range evs {
		e.Seq, e.RunId, e.Cursor = uint64(i+1), "run_p", string(rune('a'+i))
	}
	return evs
}

func TestLiveViewShowsSubAgentEvents(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	prompted := ""
	v := &liveView{w: &out, prompt: func(id string) { prompted = id }}
	for _, ev := range delegatingStream() {
		if err := v.show(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	for _, want := range []string{
		"⇢ delegated to sub-agent data-analyst (run " + childID + "): revenue by category",
		"  ┆ …89abcdef started (run " + childID + ", model m, at most 8 steps)",
		"  ┆ …89abcdef → sql_query",
		"  ┆ …89abcdef ? Which year?",
		"  ┆ …89abcdef   (the sub-agent asks: answer with baagentctl input " + childID + " ANSWER)",
		"  ┆ …89abcdef finished in 2 steps: Report: Electronics",
		"! loop on noop: continue; the call runs again",
		"Parent answer",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if prompted != "" {
		t.Errorf("prompted for the sub-agent's question %q", prompted)
	}
	if strings.Count(got, "completed in") != 1 {
		t.Errorf("the child's end shown as the run's:\n%s", got)
	}
}

// A child's complete mirrored into the parent's stream does not end the
// stream: ask/stream follow the parent to its own end.
func TestFollowRunGoesOnAfterASubAgentsEnd(t *testing.T) {
	t.Parallel()
	g := &resumingGateway{streams: []*scriptedStream{{events: delegatingStream(), err: io.EOF}}}
	var out strings.Builder
	c := newCLI(nil, &out, io.Discard, func(string) string { return "" })
	last, err := followRun(t.Context(), c, &gatewayClient{GatewayServiceClient: g}, "run_p", &jsonView{w: &out})
	if err != nil || last.GetComplete().GetContent() != "Parent answer" || last.GetSubagentRunId() != "" {
		t.Fatalf("followRun = %v, %v\n%s", last, err, out.String())
	}
	if n := len(strings.Split(strings.TrimSpace(out.String()), "\n")); n != len(delegatingStream()) {
		t.Errorf("%d events printed, want %d:\n%s", n, len(delegatingStream()), out.String())
	}
	if !strings.Contains(out.String(), `"subagent_run_id":"`+childID+`"`) {
		t.Errorf("--json output lacks subagent_run_id:\n%s", out.String())
	}
}
