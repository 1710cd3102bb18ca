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

func TestPopsAndGeneration(t *testing.T) {
	t.Parallel()
	var st Stack
	g := st.Generation()
	for _, n := range []string{"a", "b", "c"} {
		st.Push(Activation{Name: n, ID: n + "-1", Revision: "r-" + n})
	}
	if st.Generation() == g || st.Index("b") != 1 || st.Index("z") != -1 {
		t.Fatalf("generation %d, index %d", st.Generation(), st.Index("b"))
	}
	if a, ok := st.Innermost(); !ok || a.Name != "c" {
		t.Errorf("innermost %v", a)
	}
	g = st.Generation()
	ended := st.EndFrom(1)
	if len(ended) != 2 || ended[0].Name != "c" || ended[1].Name != "b" || strings.Join(st.Chain(), ",") != "a" || st.Generation() == g {
		t.Errorf("EndFrom: ended %v, chain %v", ended, st.Chain())
	}
	if st.EndFrom(5) != nil || st.EndFrom(-1) != nil {
		t.Error("EndFrom out of range must end nothing")
	}
	st.Push(Activation{Name: "d"})
	if got := st.Remove([]string{"d", "missing", "a"}); len(got) != 2 || st.Depth() != 0 {
		t.Errorf("Remove: %v, depth %d", got, st.Depth())
	}
	if _, ok := st.Innermost(); ok {
		t.Error("an empty stack has no innermost skill")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	var st Stack
	mod := &baagentv1.ContextModifier{AllowedTools: &baagentv1.ToolAllowList{Names: []string{"sql_query"}}, Model: "m"}
	st.Push(Activation{Name: "a", ID: "id-a", Revision: "r1", Modifier: mod})
	saved := st.Snapshot()
	a, err := saved[0].Activation()
	if err != nil || a.Name != "a" || a.ID != "id-a" || a.Revision != "r1" || a.Modifier.GetModel() != "m" ||
		strings.Join(a.Modifier.GetAllowedTools().GetNames(), ",") != "sql_query" {
		t.Errorf("round trip %v, %v", a, err)
	}
	if _, err := (SavedFrame{Name: "x", Modifier: []byte{0xff}}).Activation(); err == nil {
		t.Error("a damaged modifier must not decode")
	}
}
