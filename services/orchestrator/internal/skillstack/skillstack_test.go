package skillstack

import (
	"strings"
	"testing"

	"github.com/baagent/baagent/core/allowlist"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestAllowLists(t *testing.T) {
	t.Parallel()
	var st Stack
	if !allowlist.AllowsAll(st.AllowLists(nil), "anything") {
		t.Error("no lists must allow everything")
	}
	lists := st.AllowLists([]string{"sql_query", "mcp__github__*"})
	for name, want := range map[string]bool{"sql_query": true, "mcp__github__search": true, "mcp__gitlab__x": false, "file_read": false} {
		if allowlist.AllowsAll(lists, name) != want {
			t.Errorf("allowlist.AllowsAll(%s) = %v", name, !want)
		}
	}
	st.Push(Activation{Name: "a", Modifier: &baagentv1.ContextModifier{AllowedTools: &baagentv1.ToolAllowList{Names: []string{"sql_query", "file_read"}}, Model: "m1"}})
	st.Push(Activation{Name: "b", Modifier: &baagentv1.ContextModifier{}})
	lists = st.AllowLists([]string{"sql_query", "mcp__github__*"})
	if !allowlist.AllowsAll(lists, "sql_query") || allowlist.AllowsAll(lists, "file_read") || allowlist.AllowsAll(lists, "mcp__github__search") {
		t.Error("lists must intersect")
	}
	if st.Model("def") != "m1" || st.CallerID() != "skill:b" || strings.Join(st.Chain(), ",") != "a,b" {
		t.Errorf("model %s caller %s chain %v", st.Model("def"), st.CallerID(), st.Chain())
	}
	st.Push(Activation{Name: "c", Modifier: &baagentv1.ContextModifier{AllowedTools: &baagentv1.ToolAllowList{}}})
	if allowlist.AllowsAll(st.AllowLists(nil), "sql_query") {
		t.Error("an empty list must allow nothing")
	}
}
