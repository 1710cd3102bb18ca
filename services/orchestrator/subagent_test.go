package orchestrator

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestParseSubAgent(t *testing.T) {
	const valid = `
name: analyst
description: Answers questions with SQL.
system_prompt: You analyse data.
allowed_tools: [sql_query, "mcp__db__*"]
allowed_skills: [sales-analysis]
allowed_mcp_servers: [warehouse]
`
	a, err := ParseSubAgent([]byte(valid), "analyst")
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxIterations != DefaultSubAgentIterations || a.model("gpt-4o") != "gpt-4o" {
		t.Errorf("defaults: %+v", a)
	}
	if got := a.tools(); !slices.Equal(got, []string{"sql_query", "mcp__db__*", "mcp__warehouse__*"}) {
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
			_, err := ParseSubAgent([]byte(tc.doc), tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLoadSubAgents(t *testing.T) {
	agents, err := LoadSubAgents("../../examples/agents")
	if err != nil {
		t.Fatal(err)
	}
	set := &subAgents{list: agents}
	da := set.get("data-analyst")
	if da == nil || !slices.Equal(da.tools(), []string{"sql_query", "file_read"}) || len(da.AllowedSkills) != 0 {
		t.Fatalf("data-analyst = %+v (all: %v)", da, set.names())
	}
	if set.get("nope") != nil {
		t.Error("unknown agent found")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("name: broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSubAgents(dir); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Errorf("a broken file: %v", err)
	}
	if s, err := loadSubAgentsDir(filepath.Join(dir, "missing")); err != nil || len(s.list) != 0 {
		t.Errorf("a missing dir: %v, %v", s, err)
	}
	// A server with a broken definition refuses runs, saying why.
	srv := New(Options{SubAgentsDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if srv.configErr == nil || !strings.Contains(srv.configErr.Error(), "broken.yaml") {
		t.Errorf("configErr = %v", srv.configErr)
	}
}

func TestChildIDsAreDeterministic(t *testing.T) {
	at := time.UnixMilli(1_780_000_000_000)
	a, b := childRunID("run_1", "call_x", at), childRunID("run_1", "call_x", at)
	if a != b || a == childRunID("run_1", "call_y", at) || a == childRunID("run_2", "call_x", at) {
		t.Errorf("ids %s %s", a, b)
	}
	if !strings.HasPrefix(a, newRunID(at)[:17]) || len(a) != len(newRunID(at)) {
		t.Errorf("id %q does not have a run id's shape (%q)", a, newRunID(at))
	}
	if childConversationID("run_1", "call_x") != childConversationID("run_1", "call_x") {
		t.Error("conversation id not deterministic")
	}
}

func TestParseTaskArgs(t *testing.T) {
	agents := &subAgents{list: []*SubAgent{{Name: "data-analyst"}}}
	if def, a, err := parseTaskArgs(`{"subagent_type":"data-analyst","prompt":" count "}`, agents); err != nil || def.Name != "data-analyst" || a.Prompt != "count" {
		t.Errorf("= %v %+v %v", def, a, err)
	}
	for _, raw := range []string{``, `[]`, `{"subagent_type":"data-analyst"}`, `{"subagent_type":"x","prompt":"p"}`} {
		if _, _, err := parseTaskArgs(raw, agents); err == nil {
			t.Errorf("%q accepted", raw)
		}
	}
}

func FuzzParseSubAgent(f *testing.F) {
	for _, s := range []string{
		"name: a\ndescription: d\nsystem_prompt: p\nallowed_tools: [x]\n",
		"name: [\n",
		"---\n---\n",
		"max_iterations: -1\nallowed_tools: ['*']\n",
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("../../examples/agents/data-analyst.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseSubAgent(data, "")
		if err != nil {
			return
		}
		if a.Name == "" || a.Description == "" || a.SystemPrompt == "" || len(a.AllowedTools) == 0 || a.MaxIterations < 1 || a.MaxIterations > maxSubAgentMaxIterations {
			t.Fatalf("accepted an invalid definition: %+v", a)
		}
		schema := taskToolSchema([]*SubAgent{a})
		if schema.GetName() != TaskToolName || !strings.Contains(schema.GetDescription(), a.Name) {
			t.Fatalf("schema %v", schema)
		}
	})
}

func TestSubAgentRestrictions(t *testing.T) {
	agents := &subAgents{list: []*SubAgent{
		{Name: "delegator", AllowedTools: []string{"task", "sql_query"}},
		{Name: "reviewer", AllowedTools: []string{"file_read"}, AllowedSkills: []string{"data-quality-check"}},
	}}
	runAt := func(maxDepth int, labels map[string]string, parent string) *run {
		s := &Server{agents: agents, opts: Options{SubAgentMaxDepth: maxDepth}}
		return &run{s: s, rec: &baagentv1.Run{RunId: "run_c", ConversationId: "conv_c", ParentRunId: parent, Labels: labels}}
	}
	lists := func(names ...string) []*baagentv1.ToolAllowList {
		return []*baagentv1.ToolAllowList{{Names: names}}
	}
	top := runAt(1, nil, "")
	if !top.offersTask(nil) || !top.offersSkills() || top.skillRefused("anything") != "" || top.workspaceConversation() != "conv_c" {
		t.Error("a top-level run is restricted")
	}
	if top.offersTask(lists("sql_query")) {
		t.Error("task offered against the run's allow list")
	}
	child := map[string]string{labelSubAgent: "delegator", labelSubAgentDepth: "1", labelWorkspace: "conv_p"}
	if r := runAt(1, child, "run_p"); r.offersTask(lists("task", "sql_query")) || r.workspaceConversation() != "conv_p" || r.offersSkills() {
		t.Error("a depth-1 sub-agent may delegate at max depth 1, or uses its own workspace, or is offered skills")
	}
	if r := runAt(2, child, "run_p"); !r.offersTask(lists("task", "sql_query")) || r.depth() != 1 {
		t.Error("a depth-1 sub-agent may not delegate at max depth 2")
	}
	reviewer := runAt(1, map[string]string{labelSubAgent: "reviewer", labelSubAgentDepth: "1"}, "run_p")
	if !reviewer.offersSkills() || reviewer.skillRefused("data-quality-check") != "" || !strings.Contains(reviewer.skillRefused("sales-analysis"), "only these skills: data-quality-check") {
		t.Error("the reviewer's skills")
	}
	gone := runAt(1, map[string]string{labelSubAgent: "removed"}, "run_p")
	if gone.offersSkills() || gone.skillRefused("x") == "" {
		t.Error("a sub-agent whose definition is gone may use skills")
	}
	// Only the orchestrator sets these labels: a client may not.
	err := validateStartRun(&baagentv1.OrchestratorServiceStartRunRequest{Tenant: "t", ParentRunId: "run_p", Spec: &baagentv1.RunSpec{
		Input: "x", Labels: map[string]string{labelWorkspace: "conv_other", "team": "a"},
	}})
	if err == nil || !strings.Contains(err.Error(), `spec.labels["baagent.workspace"]`) || strings.Contains(err.Error(), "team") {
		t.Errorf("reserved label: %v", err)
	}
}
