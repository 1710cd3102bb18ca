package allowlist

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"sql_query", "sql_query", true},
		{"sql_query", "sql_querx", false},
		{"mcp__github__*", "mcp__github__issues", true},
		{"mcp__github__*", "mcp__gitlab__issues", false},
		{"read_?", "read_a", true},
		{"[", "[", true},  // malformed glob: itself only
		{"[", "a", false}, // and nothing else
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestAllowsAndAllowsAll(t *testing.T) {
	t.Parallel()
	if !Allows(nil, "anything") {
		t.Error("a nil list must admit every name")
	}
	empty := &baagentv1.ToolAllowList{}
	if Allows(empty, "x") {
		t.Error("an empty list must admit nothing")
	}
	a := &baagentv1.ToolAllowList{Names: []string{"web_*", "sql_query"}}
	b := &baagentv1.ToolAllowList{Names: []string{"web_search"}}
	if !AllowsAll([]*baagentv1.ToolAllowList{a, b}, "web_search") {
		t.Error("web_search passes both lists")
	}
	if AllowsAll([]*baagentv1.ToolAllowList{a, b}, "sql_query") {
		t.Error("sql_query fails the second list")
	}
	if !AllowsAll(nil, "x") {
		t.Error("no lists admit every name")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("mcp__*", "mcp__x")
	f.Add("[", "[")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if pattern == name && !Match(pattern, name) {
			t.Fatalf("Match(%q, itself) = false", pattern)
		}
	})
}
