package runevent

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestTypeAndTerminal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ev       *baagentv1.Event
		typ      string
		terminal bool
	}{
		{&baagentv1.Event{}, "", false},
		{&baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{}}}, "complete", true},
		{&baagentv1.Event{Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{}}}, "error", true},
		{&baagentv1.Event{Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{}}}, "cancelled", true},
		{&baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{}}}, "step_start", false},
	}
	for _, c := range cases {
		if got := Type(c.ev); got != c.typ {
			t.Errorf("Type(%v) = %q, want %q", c.ev, got, c.typ)
		}
		if got := IsTerminal(c.ev); got != c.terminal {
			t.Errorf("IsTerminal(%v) = %v, want %v", c.ev, got, c.terminal)
		}
		if c.typ != "" && !IsTypeName(c.typ) {
			t.Errorf("IsTypeName(%q) = false for a real type", c.typ)
		}
	}
}

func TestIsTypeNameRejectsOtherShapes(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "Tool_call", "tool-call", "tool call", "é", string(make([]byte, MaxTypeLen+1))} {
		if IsTypeName(s) {
			t.Errorf("IsTypeName(%q) = true", s)
		}
	}
}

func TestMsgID(t *testing.T) {
	t.Parallel()
	if got := MsgID("run_1", 42); got != "run_1:42" {
		t.Errorf("MsgID = %q", got)
	}
}

func TestMirroredTerminalIsNotTerminal(t *testing.T) {
	t.Parallel()
	for _, ev := range []*baagentv1.Event{
		{SubagentRunId: "run_child", Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{}}},
		{SubagentRunId: "run_child", Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{}}},
		{SubagentRunId: "run_child", Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{}}},
	} {
		if IsTerminal(ev) {
			t.Errorf("IsTerminal(%v) = true for a mirrored child event", ev)
		}
	}
}

func TestIsDelta(t *testing.T) {
	t.Parallel()
	if !IsDelta(&baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{}}}) ||
		!IsDelta(&baagentv1.Event{Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{}}}) {
		t.Error("a delta is not a delta")
	}
	if IsDelta(&baagentv1.Event{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{}}}) {
		t.Error("a thought is a delta")
	}
	if got := MirrorMsgID("run_p", "run_c", 7); got != "run_p:run_c:7" {
		t.Errorf("MirrorMsgID = %q", got)
	}
}
