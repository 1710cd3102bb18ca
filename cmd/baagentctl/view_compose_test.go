package main

import (
	"bytes"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The live view indents the calls a tool composition made under its call.
func TestLiveViewIndentsCompositionInnerCalls(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := &liveView{w: &out}
	for _, ev := range []*baagentv1.Event{
		{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "c1", ToolName: "pair", RawArguments: "{}"}}},
		{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "c1/s0", ToolName: "file_read", RawArguments: "{}", ParentToolCallId: "c1"}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "c1/s0", ToolName: "file_read", Success: true, Observation: "inner", ParentToolCallId: "c1"}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "c1", ToolName: "pair", Success: true, Observation: "outer"}}},
	} {
		if err := v.show(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	for _, want := range []string{"\n→ pair {}", "    ┆ → file_read", "    ┆ ← file_read ok", "    ┆   inner", "\n← pair ok"} {
		if !strings.Contains("\n"+got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
