package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/topology"
)

// delegateScenarios: the parent delegates to the data-analyst sub-agent
// and reports; the child answers its task at once.
const delegateScenarios = `name: cli-delegate
description: baagentctl test; delegates to a sub-agent.
example: "cli test: delegate"
match:
  exact: ["cli test: delegate"]
turns:
  - text: Delegating.
    tool_calls:
      - name: task
        arguments:
          subagent_type: data-analyst
          description: count the rows
          prompt: "cli test: child task"
  - text: "Parent done. {{ .LastToolResult }}"
`

const childScenario = `name: cli-delegate-child
description: baagentctl test; the sub-agent's answer.
example: "cli test: child task"
match:
  exact: ["cli test: child task"]
turns:
  - text: Child report, 42 rows.
`

// ask follows a delegating run through the gateway: the sub-agent's events
// are shown under its id, its end does not end the stream, and the exit
// status is the parent's.
func TestAskShowsTheSubAgentsWork(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	scenarios := t.TempDir()
	for name, body := range map[string]string{"cli-delegate.yaml": delegateScenarios, "cli-delegate-child.yaml": childScenario} {
		if err := os.WriteFile(filepath.Join(scenarios, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := startApp(t, scenarios, "-api-keys="+testAPIKey+"="+testTenant, "-subagents-dir=../../examples/agents")
	env := map[string]string{"BAAGENT_ADDR": a.Addr(topology.Gateway).String(), "BAAGENT_API_KEY": testAPIKey}
	testkit.Eventually(t, 20*time.Second, "the gateway serving runs list", func() bool {
		code, _, _ := ctlRun(t.Context(), env, "runs", "list", "--timeout=2s")
		return code == 0
	})

	code, out, errOut := ctlRun(ctx, env, "ask", "cli test: delegate")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"⇢ delegated to sub-agent data-analyst (run run_", "): count the rows", "  ┆ …", " started (run run_", " finished in 1 steps: Child report, 42 rows.", "Parent done.", "completed in 2 steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "finished in 1 steps") > strings.Index(out, "completed in 2 steps") {
		t.Errorf("the child's end after the parent's:\n%s", out)
	}

	code, out, errOut = ctlRun(ctx, env, "ask", "--json", "cli test: delegate")
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	mirrored, childEnds := 0, 0
	for i, l := range lines {
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		ev := &baagentv1.Event{}
		if err := protojson.Unmarshal([]byte(l), ev); err != nil || ev.GetSeq() != uint64(i+1) {
			t.Fatalf("line %d: %v seq %d", i, err, ev.GetSeq())
		}
		if ev.GetSubagentRunId() != "" {
			mirrored++
			if ev.GetComplete() != nil {
				childEnds++
			}
		}
	}
	last := &baagentv1.Event{}
	if err := protojson.Unmarshal([]byte(lines[len(lines)-1]), last); err != nil || last.GetComplete() == nil || last.GetSubagentRunId() != "" {
		t.Errorf("last line %s", lines[len(lines)-1])
	}
	if mirrored < 3 || childEnds != 1 {
		t.Errorf("%d mirrored events, %d child ends:\n%s", mirrored, childEnds, out)
	}
}
