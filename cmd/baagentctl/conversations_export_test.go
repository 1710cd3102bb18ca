package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/exporttest"
)

// The round trip: real runs of the whole suite (the scripted model, a
// tool call, a clarification the user answers) exported through the
// gateway by the CLI. The openai export passes the scripted model's strict
// validator of request messages, the claude export pairs every tool_use
// with one tool_result, and the ids are the model's call ids.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	env := startGatewaySuite(t)
	gw := gatewayFor(t, env)
	const conv = "conv-export"
	if code, out, errOut := ctlRun(ctx, env, "ask", "--conversation", conv, revenueQuestion); code != 0 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, out, errOut)
	}
	var out testkit.SyncBuffer
	if code, errOut := ctlRunIn(ctx, env, "Q4\n", &out, "ask", "--conversation", conv, clarifyQuestion); code != 0 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, out.String(), errOut)
	}
	list, err := gw.ListRuns(gw.auth(ctx), &baagentv1.ListRunsRequest{ConversationId: conv})
	if err != nil || len(list.GetRuns()) != 2 {
		t.Fatalf("ListRuns: %v %v", list, err)
	}
	var revenue *baagentv1.Run
	for _, r := range list.GetRuns() {
		r = waitRun(t, gw, r.GetRunId(), "completed", func(r *baagentv1.Run) bool { return r.GetState() == baagentv1.RunState_RUN_STATE_COMPLETED })
		if r.GetInput() == revenueQuestion {
			revenue = r
		}
	}
	if revenue == nil {
		t.Fatal("the revenue run is not listed")
	}

	dir := t.TempDir()
	read := func(format string) []byte {
		path := filepath.Join(dir, "run."+format)
		code, stdout, errOut := ctlRun(ctx, env, "runs", "export", revenue.GetRunId(), "--format", format, "-o", path)
		if code != 0 || stdout != "" {
			t.Fatalf("runs export --format %s: exit %d\n%s\n%s", format, code, stdout, errOut)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// The model's call ids, from the events.
	lines, err := exporttest.Events(read("events"))
	if err != nil {
		t.Fatal(err)
	}
	var callIDs []string
	for i, l := range lines {
		if l["run_id"] != revenue.GetRunId() || l["seq"] == nil {
			t.Errorf("line %d: %v", i, l)
		}
		if l["type"] == "act" {
			callIDs = append(callIDs, l["act"].(map[string]any)["tool_call_id"].(string))
		}
	}
	if len(callIDs) != 1 || !strings.HasPrefix(callIDs[0], "call_revenue-by-category_") || lines[len(lines)-1]["type"] != "complete" {
		t.Fatalf("call ids %v, last event %v", callIDs, lines[len(lines)-1]["type"])
	}

	msgs, err := exporttest.Claude(read("claude"))
	if err != nil {
		t.Fatal(err)
	}
	var uses, results []string
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
				if b.Name != "sql_query" || !strings.Contains(string(b.Input), "SELECT p.category") {
					t.Errorf("tool_use %s %s", b.Name, b.Input)
				}
			case "tool_result":
				results = append(results, b.ToolUseID)
				if *b.IsError || !strings.Contains(b.Content, "Software") {
					t.Errorf("tool_result %+v", b)
				}
			}
		}
	}
	if !slices.Equal(uses, callIDs) || !slices.Equal(results, callIDs) {
		t.Errorf("tool_use ids %v, tool_result ids %v, want the model's %v", uses, results, callIDs)
	}
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content[len(last.Content)-1].Text != revenue.GetFinalAnswer() {
		t.Errorf("last message %+v, want the final answer", last)
	}

	oa, err := exporttest.OpenAI(read("openai"))
	if err != nil {
		t.Fatal(err)
	}
	if len(oa) != 4 || oa[0].Content != revenueQuestion || len(oa[1].ToolCalls) != 1 || oa[1].ToolCalls[0].ID != callIDs[0] ||
		oa[2].ToolCallID != callIDs[0] || oa[3].Content != revenue.GetFinalAnswer() {
		t.Errorf("openai export %+v", oa)
	}

	// The conversation, oldest run first, to standard output.
	code, stdout, errOut := ctlRun(ctx, env, "conversations", "export", conv, "--format", "openai")
	if code != 0 {
		t.Fatalf("conversations export: exit %d\n%s", code, errOut)
	}
	oa, err = exporttest.OpenAI([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	answered := false
	for _, m := range oa {
		if m.Role == "user" {
			asked = append(asked, m.Content)
		}
		answered = answered || (m.Role == "tool" && m.Content == "The user answered: Q4")
	}
	if !slices.Equal(asked, []string{revenueQuestion, clarifyQuestion}) || !answered {
		t.Errorf("user messages %q, clarification answered %v:\n%s", asked, answered, stdout)
	}
	code, stdout, _ = ctlRun(ctx, env, "conversations", "export", conv, "--format", "claude")
	if _, err := exporttest.Claude([]byte(stdout)); code != 0 || err != nil {
		t.Errorf("claude conversation export: exit %d, %v", code, err)
	}

	// Unknown ids and bad flags; a failed export leaves no file.
	bad := filepath.Join(dir, "nope.json")
	if code, _, errOut := ctlRun(ctx, env, "runs", "export", "run_nope", "--format", "claude", "-o", bad); code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("unknown run: exit %d: %s", code, errOut)
	}
	if code, _, errOut := ctlRun(ctx, env, "conversations", "export", "conv-nope", "--format", "events", "-o", bad); code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("unknown conversation: exit %d: %s", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("files left in the output directory: %v", entries)
	}
	if code, _, errOut := ctlRun(ctx, env, "runs", "export", revenue.GetRunId(), "--format", "yaml"); code != 2 || !strings.Contains(errOut, "--format must be claude, openai or events") {
		t.Errorf("bad format: exit %d: %s", code, errOut)
	}
	if code, _, _ := ctlRun(ctx, env, "runs", "export", "--format", "claude"); code != 2 {
		t.Errorf("no run id: exit %d", code)
	}
}
