package contextsvc

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestExtractPassOldestFirst: the pass collapses the members it selects,
// oldest first, and stops once the window is at its target.
func TestExtractPassOldestFirst(t *testing.T) {
	t.Parallel()
	const low = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW
	p := planFor(t, rounds(6, low, 500)...)
	pass := extractPass{older, softTarget, importanceOlderThan(low, lowRoundsAge)}

	p.soft = p.total - 1 // the oldest unit is enough
	if err := pass.apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{"a0": unitCollapsed, "a1": unitKept, "u0": unitKept})
	checkTotal(t, p)

	// With no target in reach, every LOW unit more than 3 rounds older
	// than the newest goes, and nothing else: the user requests are
	// CRITICAL.
	p.soft = 0
	if err := pass.apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{
		"a0": unitCollapsed, "a1": unitCollapsed, "a2": unitKept, "a5": unitKept,
		"u0": unitKept, "u1": unitKept,
	})
	if _, u := itemOf(t, p, "a0"); u.compact.msg.GetKind() != baagentv1.MessageKind_MESSAGE_KIND_SUMMARY || u.compactN >= 500+4 {
		t.Errorf("collapsed a0: kind %v, %d tokens", u.compact.msg.GetKind(), u.compactN)
	}
	checkTotal(t, p)
}

// TestExtractPassMembers: in a tool-call unit, selected members become
// extracts one by one while other members stay; once every member that is
// left is selected, the unit collapses whole.
func TestExtractPassMembers(t *testing.T) {
	t.Parallel()
	call := &baagentv1.ChatMessage{Id: "a0", Role: roleAssistant, Content: strings.Repeat("plan ", 100),
		ToolCalls: []*baagentv1.ToolCall{{Id: "c0", Name: "sql_query"}}} // MEDIUM by default
	result := &baagentv1.ChatMessage{Id: "t0", Role: roleTool, ToolCallId: "c0", ToolName: "sql_query", Content: strings.Repeat("row ", 125)} // HIGH
	p := planFor(t, userMsg("u0"), call, result, userMsg("u1"))
	p.soft = 0

	medium := extractPass{older, softTarget, importanceIn(baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM)}
	if err := medium.apply(p); err != nil {
		t.Fatal(err)
	}
	a0, u := itemOf(t, p, "a0")
	t0, _ := itemOf(t, p, "t0")
	if u.state != unitKept || a0.form != formExtract || t0.form != formVerbatim {
		t.Fatalf("after the MEDIUM pass: unit %d, a0 form %d, t0 form %d", u.state, a0.form, t0.form)
	}
	if len(a0.msg.msg.GetToolCalls()) != 1 {
		t.Errorf("the extract of a0 lost its tool call")
	}
	checkTotal(t, p)

	high := extractPass{older, softTarget, importanceIn(baagentv1.MessageImportance_MESSAGE_IMPORTANCE_HIGH)}
	if err := high.apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{"a0": unitCollapsed, "u0": unitKept, "u1": unitKept})
	checkTotal(t, p)
}
