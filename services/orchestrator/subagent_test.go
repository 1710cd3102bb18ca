package orchestrator

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/subagent"
)

func TestBrokenSubAgentRefusesRuns(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("name: broken\n"), 0o600); err != nil {
		t.Fatal(err)
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
	first, again := childConversationID("run_1", "call_x"), childConversationID("run_1", "call_x")
	if first != again {
		t.Error("conversation id not deterministic")
	}
}

func TestParseTaskArgs(t *testing.T) {
	agents := subagent.NewSet([]*SubAgent{{Name: "data-analyst"}})
	if def, a, err := parseTaskArgs(`{"subagent_type":"data-analyst","prompt":" count "}`, agents); err != nil || def.Name != "data-analyst" || a.Prompt != "count" {
		t.Errorf("= %v %+v %v", def, a, err)
	}
	for _, raw := range []string{``, `[]`, `{"subagent_type":"data-analyst"}`, `{"subagent_type":"x","prompt":"p"}`} {
		if _, _, err := parseTaskArgs(raw, agents); err == nil {
			t.Errorf("%q accepted", raw)
		}
	}
}

func TestSubAgentRestrictions(t *testing.T) {
	agents := subagent.NewSet([]*SubAgent{
		{Name: "delegator", AllowedTools: []string{"task", "sql_query"}},
		{Name: "reviewer", AllowedTools: []string{"file_read"}, AllowedSkills: []string{"data-quality-check"}},
	})
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
		if a.Name == "" || a.Description == "" || a.SystemPrompt == "" || len(a.AllowedTools) == 0 || a.MaxIterations < 1 || a.MaxIterations > 500 { // the definition's limit
			t.Fatalf("accepted an invalid definition: %+v", a)
		}
		schema := taskToolSchema([]*SubAgent{a})
		if schema.GetName() != TaskToolName || !strings.Contains(schema.GetDescription(), a.Name) {
			t.Fatalf("schema %v", schema)
		}
	})
}
