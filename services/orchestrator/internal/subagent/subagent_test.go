package subagent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()

	const valid = `
name: analyst
description: Answers questions with SQL.
system_prompt: You analyse data.
allowed_tools: [sql_query, "mcp__db__*"]
allowed_skills: [sales-analysis]
allowed_mcp_servers: [warehouse]
`
	a, err := Parse([]byte(valid), "analyst")
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxIterations != DefaultIterations || a.ChildModel("gpt-4o") != "gpt-4o" {
		t.Errorf("defaults: %+v", a)
	}
	if got := a.Tools(); !slices.Equal(got, []string{"sql_query", "mcp__db__*", "mcp__warehouse__*"}) {
		t.Errorf("tools %v", got)
	}
	for _, tc := range []struct{ name, doc, file, want string }{
		{"empty", "", "x", "empty"},
		{"unknown key", valid + "temperature: 0.2\n", "analyst", "temperature"},
		{"file name", valid, "other", `must equal the file's base name "other"`},
		{"bad name", strings.Replace(valid, "name: analyst", "name: Analyst_1", 1), "", "name:"},
		{"no tools", strings.Replace(valid, `allowed_tools: [sql_query, "mcp__db__*"]`, "", 1), "analyst", "allowed_tools: required"},
		{"bad tool", strings.Replace(valid, "sql_query,", `"sql query",`, 1), "analyst", "allowed_tools[0]"},
		{"bad skill", strings.Replace(valid, "sales-analysis", "Sales", 1), "analyst", "allowed_skills[0]"},
		{"no prompt", strings.Replace(valid, "system_prompt: You analyse data.", "", 1), "analyst", "system_prompt"},
		{"no description", strings.Replace(valid, "description: Answers questions with SQL.", "", 1), "analyst", "description"},
		{"iterations", valid + "max_iterations: 501\n", "analyst", "max_iterations"},
		{"two documents", valid + "---\nname: b\n", "analyst", "one definition per file"},
		{"model with space", valid + "model: gpt 4\n", "analyst", "model:"},
		{"not yaml", "name: [", "x", "not a sub-agent definition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc), tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()

	agents, err := Load("../../../../examples/agents")
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet(agents)
	da := set.Get("data-analyst")
	if da == nil || !slices.Equal(da.Tools(), []string{"sql_query", "file_read"}) || len(da.AllowedSkills) != 0 {
		t.Fatalf("data-analyst = %+v (all: %v)", da, set.Names())
	}
	if set.Get("nope") != nil {
		t.Error("unknown agent found")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("name: broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Errorf("a broken file: %v", err)
	}
	if s, err := LoadDir(filepath.Join(dir, "missing")); err != nil || len(s.All()) != 0 {
		t.Errorf("a missing dir: %v, %v", s, err)
	}
}
