package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// toolKillScenario writes a file, then runs a query long enough for the
// toolrunner to be killed while it runs, then answers with its result.
func toolKillScenario(rows int) string {
	return fmt.Sprintf(`name: tool-kill
match:
  contains: [ "toolrunner fault" ]
turns:
  - text: Writing the report first.
    tool_calls:
      - name: file_write
        arguments: { path: reports/one.md, content: "first" }
  - tool_calls:
      - name: sql_query
        arguments:
          query: %q
  - text: "Done: {{ .LastToolResult | firstRow | cell 0 }} rows counted."
`, slowQuery(rows))
}

// Scenario b: the toolrunner is killed with SIGKILL while it executes a
// slow sql_query and started again. The run must end — with the answer
// (the call retried) or with a clear error naming the toolrunner — and the
// file_write before it must have run exactly once.
func TestToolRunnerKilledDuringToolCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const rows = 3000000
	c := startCluster(t, startOptions(t, map[string]string{"tool-kill": toolKillScenario(rows)}))
	g := newGatewayClient(t, c)
	runID := g.startRun(ctx, t, "toolrunner fault")
	rec := &recorder{}
	errs := make(chan error, 1)
	go func() { errs <- g.followGRPC(ctx, runID, rec) }()

	testkit.EventuallyContext(ctx, t, "the sql_query act", func() (bool, string) { return rec.has(actOf("sql_query")), "" })
	// The act event is published before the call is sent: wait until the
	// toolrunner has the call (its workspace lock is taken by then).
	killedAt := time.Now()
	c.Kill("toolrunner")
	c.Start("toolrunner")
	c.WaitServing("toolrunner")
	t.Logf("toolrunner back after %s", time.Since(killedAt).Round(time.Millisecond))
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	evs := rec.snapshot()
	checkStream(t, "run "+runID, evs)
	last := terminal(evs)
	switch {
	case last.GetType() == "complete" && last.GetComplete().GetContent() == fmt.Sprintf("Done: %d rows counted.", rows):
		t.Logf("run completed %s after the kill (the call was retried)", time.Since(killedAt).Round(time.Millisecond))
	case last.GetType() == "error" && strings.Contains(last.GetError().GetMessage(), "toolrunner"):
		t.Logf("run ended with a clear error %s after the kill: %s: %s", time.Since(killedAt).Round(time.Millisecond), last.GetError().GetCode(), last.GetError().GetMessage())
	default:
		t.Fatalf("run ended %s %q %q; types %v", last.GetType(), last.GetComplete().GetContent(), last.GetError().GetMessage(), types(evs))
	}
	run := g.waitFinished(ctx, t, runID)

	// The write ran once: one execution logged across both toolrunner
	// processes, and the file holds what was written.
	writes := 0
	for _, line := range strings.Split(c.Log("toolrunner"), "\n") {
		if strings.Contains(line, `"msg":"tool call"`) && strings.Contains(line, `"tool":"file_write"`) {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("file_write executed %d times", writes)
	}
	b, err := os.ReadFile(filepath.Join(c.WorkspaceDir, tenant, run.GetConversationId(), "reports", "one.md"))
	if err != nil || string(b) != "first" {
		t.Errorf("workspace file: %q, %v", b, err)
	}
	if strings.Count(c.Log("toolrunner"), `"msg":"baagent running"`) != 2 {
		t.Errorf("toolrunner did not run twice; log:\n%s", c.Log("toolrunner"))
	}
}
