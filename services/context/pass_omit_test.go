package contextsvc

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestOmitPassKeepsWhatMustStay: in a unit that must stay (it holds an
// error), the members that may be compressed get the placeholder; the
// error, skill instructions and user requests stay verbatim.
func TestOmitPassKeepsWhatMustStay(t *testing.T) {
	t.Parallel()
	call := &baagentv1.ChatMessage{Id: "a0", Role: roleAssistant, Content: strings.Repeat("plan ", 80),
		ToolCalls: []*baagentv1.ToolCall{{Id: "c0", Name: "sql_query"}}}
	failed := &baagentv1.ChatMessage{Id: "t0", Role: roleTool, ToolCallId: "c0", ToolName: "sql_query", IsError: true, Content: strings.Repeat("error ", 80)}
	skill := &baagentv1.ChatMessage{Id: "s0", Role: roleSystem, Kind: baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION, Content: strings.Repeat("step ", 80)}
	p := planFor(t, userMsg("u0"), call, failed, skill, userMsg("u1"))
	p.soft = 0
	if err := (omitPass{older, softTarget}).apply(p); err != nil {
		t.Fatal(err)
	}
	a0, u := itemOf(t, p, "a0")
	if a0.form != formOmitted || a0.msg.msg.GetContent() != omittedPlaceholder || u.state != unitKept {
		t.Fatalf("a0: form %d, content %q, unit state %d", a0.form, a0.msg.msg.GetContent(), u.state)
	}
	for _, id := range []string{"t0", "s0", "u0", "u1"} {
		if it, _ := itemOf(t, p, id); it.form != formVerbatim {
			t.Errorf("%s: form %d, want verbatim", id, it.form)
		}
	}
	checkTotal(t, p)
}
