package orchestrator

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/toolrunner"
)

const compositionTools = `
compositions:
  - name: read_then_count
    description: Read a file, then count the products.
    input_schema:
      type: object
      properties: {path: {type: string}}
      required: [path]
    kind: sequential
    steps:
      - tool: file_read
        args: {path: "$input.path"}
      - tool: sql_query
        args: {query: "SELECT COUNT(*) AS n FROM products"}
`

// compositionPeers are the real context service and a toolrunner whose
// tools file defines compositionTools.
func compositionPeers(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	cs := contextsvc.New(contextsvc.Options{Logger: discard, JetStream: js, Tokens: tokens})
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(file, []byte(compositionTools), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := toolrunner.New(toolrunner.Options{
		Logger:           discard,
		WorkspaceDir:     filepath.Join(dir, "workspaces"),
		WorkspaceSeedDir: filepath.Join("..", "..", "examples", "data"),
		ArtifactDir:      filepath.Join(dir, "artifacts"),
		ConfigFile:       file,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = cs.Run(ctx); done <- struct{}{} }()
	go func() { _ = tr.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; _ = tr.Close() })
	return cs, tr
}

// TestCompositionEmitsNestedEvents: a scripted model calls a composition;
// the run's events hold the composition's act, then an act and an observe
// per inner call carrying the composition's id as parent_tool_call_id,
// then the composition's observe.
func TestCompositionEmitsNestedEvents(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("Read and count.", "call_c", "read_then_count", `{"path":"products.csv"}`), nil
		}
		res := lastToolResults(req)
		if len(res) != 1 || res[0].GetToolCallId() != "call_c" || res[0].GetIsError() {
			t.Errorf("tool results %v", res)
		}
		return answer("done"), nil
	}, harnessOptions{real: compositionPeers})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "count the products"})
	evs := h.events(ctx, run.GetRunId())
	var seq []string
	for _, e := range evs {
		switch {
		case e.GetAct() != nil:
			a := e.GetAct()
			seq = append(seq, "act:"+a.GetToolName()+"<"+a.GetParentToolCallId())
			if a.GetParentToolCallId() != "" && a.GetToolInput() == nil {
				t.Errorf("inner act without input: %v", a)
			}
		case e.GetObserve() != nil:
			o := e.GetObserve()
			seq = append(seq, "observe:"+o.GetToolName()+"<"+o.GetParentToolCallId())
			if !o.GetSuccess() {
				t.Errorf("observe failed: %v", o)
			}
			if o.GetToolName() == "sql_query" && (o.GetToolCallId() != "call_c/s1" || !strings.Contains(o.GetObservation(), "| n |")) {
				t.Errorf("inner observe %v", o)
			}
		}
	}
	want := "act:read_then_count<,act:file_read<call_c,observe:file_read<call_c,act:sql_query<call_c,observe:sql_query<call_c,observe:read_then_count<"
	if got := strings.Join(seq, ","); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if final := h.waitRun(ctx, run.GetRunId()); final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Errorf("run %v", final.GetState())
	}
}
