package contextsvc

import (
	"fmt"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestUserRequestBelowCritical: a user request its caller marked LOW may be
// compressed, and the window says so (is_compressed with its id).
func TestUserRequestBelowCritical(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	var hist []*baagentv1.ChatMessage
	for i := range 30 {
		hist = append(hist,
			&baagentv1.ChatMessage{Id: fmt.Sprintf("u%d", i), Role: roleUser, Content: strings.Repeat("pasted report text ", 200), Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW},
			&baagentv1.ChatMessage{Id: fmt.Sprintf("a%d", i), Role: roleAssistant, Content: "noted"})
	}
	appendAll(t, e.client, "t", "c", hist)
	req := buildReqFor("test-8k", strategyTruncate)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "test-8k", history: readAll(t, e.client, "t", "c", 0)}.check(t, e, req, resp)
}

// TestDropPassLeavesOutOldestUnits: units go oldest first until the target;
// a user request marked below CRITICAL is collapsed, not dropped; CRITICAL
// units and the other zone stay.
func TestDropPassLeavesOutOldestUnits(t *testing.T) {
	t.Parallel()
	const low = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW
	pasted := &baagentv1.ChatMessage{Id: "u0", Role: roleUser, Content: strings.Repeat("pasted ", 100), Importance: low}
	p := planFor(t, pasted, assistantMsg("a0", low, 400), userMsg("u1"), assistantMsg("a1", low, 400), userMsg("u2"), assistantMsg("a2", low, 400))
	for _, u := range p.units[4:] {
		u.recent = true
	}
	pass := dropPass{older, softTarget}

	p.soft = p.total - 1 // collapsing u0 is enough
	if err := pass.apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{"u0": unitCollapsed, "a0": unitKept})
	if _, u := itemOf(t, p, "u0"); !strings.Contains(u.compact.msg.GetContent(), "[user] pasted") {
		t.Errorf("collapsed u0 does not show the request: %q", u.compact.msg.GetContent())
	}
	checkTotal(t, p)

	p.soft = 0
	if err := pass.apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{
		"u0": unitCollapsed, "a0": unitDropped, "u1": unitKept, "a1": unitDropped,
		"u2": unitKept, "a2": unitKept, // recent
	})
	checkTotal(t, p)
}
