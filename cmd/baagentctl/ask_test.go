package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/orchestrator"
)

// fakeOrchestrator answers StartRun by publishing a scripted event
// sequence on JetStream, as the orchestrator does, and serves canned runs.
type fakeOrchestrator struct {
	baagentv1.UnimplementedOrchestratorServiceServer
	js     jetstream.JetStream
	script []*baagentv1.Event // payloads; the envelope is filled in

	mu      sync.Mutex
	started *baagentv1.OrchestratorServiceStartRunRequest
	seq     uint64
	cancels []string
}

const fakeRunID = "run_0190aa_cli"

func (f *fakeOrchestrator) publish(ctx context.Context, run *baagentv1.Run, ev *baagentv1.Event) error {
	f.mu.Lock()
	f.seq++
	ev.Seq = f.seq
	f.mu.Unlock()
	ev.RunId, ev.Tenant, ev.ConversationId, ev.Ts = run.GetRunId(), run.GetTenant(), run.GetConversationId(), timestamppb.Now()
	ev.Type = orchestrator.EventType(ev)
	subject, err := natsx.EventSubject(run.GetTenant(), run.GetRunId())
	if err != nil {
		return err
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = f.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{orchestrator.MsgID(run.GetRunId(), ev.Seq)}}})
	return err
}

func (f *fakeOrchestrator) run(tenant string) *baagentv1.Run {
	return &baagentv1.Run{RunId: fakeRunID, Tenant: tenant, ConversationId: "conv-cli", State: baagentv1.RunState_RUN_STATE_QUEUED, Model: "scripted", Input: "q"}
}

func (f *fakeOrchestrator) StartRun(ctx context.Context, req *baagentv1.OrchestratorServiceStartRunRequest) (*baagentv1.OrchestratorServiceStartRunResponse, error) {
	f.mu.Lock()
	f.started = req
	f.mu.Unlock()
	run := f.run(req.GetTenant())
	for _, ev := range f.script {
		if err := f.publish(ctx, run, proto.Clone(ev).(*baagentv1.Event)); err != nil {
			return nil, err
		}
	}
	return &baagentv1.OrchestratorServiceStartRunResponse{Run: run}, nil
}

func (f *fakeOrchestrator) CancelRun(ctx context.Context, req *baagentv1.OrchestratorServiceCancelRunRequest) (*baagentv1.OrchestratorServiceCancelRunResponse, error) {
	f.mu.Lock()
	f.cancels = append(f.cancels, req.GetRunId()+": "+req.GetReason())
	f.mu.Unlock()
	run := f.run(req.GetTenant())
	run.State = baagentv1.RunState_RUN_STATE_CANCELLED
	if err := f.publish(ctx, run, &baagentv1.Event{Payload: &baagentv1.Event_Cancelled{Cancelled: &baagentv1.CancelledPayload{Reason: req.GetReason()}}}); err != nil {
		return nil, err
	}
	return &baagentv1.OrchestratorServiceCancelRunResponse{Run: run}, nil
}

func (f *fakeOrchestrator) GetRun(_ context.Context, req *baagentv1.OrchestratorServiceGetRunRequest) (*baagentv1.OrchestratorServiceGetRunResponse, error) {
	run := f.run(req.GetTenant())
	run.State = baagentv1.RunState_RUN_STATE_COMPLETED
	run.FinalAnswer = "Electronics led with 125,000."
	run.Step, run.MaxSteps, run.ScriptedModel = 2, 50, true
	run.Metrics = &baagentv1.ConversationMetrics{ConversationId: "conv-cli", TotalInputTokens: 1200, TotalOutputTokens: 80, TotalTokens: 1280,
		ToolCalls: []*baagentv1.ToolMetrics{{ToolName: "sql_query", DurationMs: 12, Success: true}}, SuccessfulCalls: 1}
	return &baagentv1.OrchestratorServiceGetRunResponse{Run: run}, nil
}

func (f *fakeOrchestrator) ListRuns(_ context.Context, req *baagentv1.OrchestratorServiceListRunsRequest) (*baagentv1.OrchestratorServiceListRunsResponse, error) {
	if len(req.GetStates()) != 1 || req.GetStates()[0] != baagentv1.RunState_RUN_STATE_COMPLETED || req.GetConversationId() != "conv-cli" {
		return &baagentv1.OrchestratorServiceListRunsResponse{}, nil
	}
	run := f.run(req.GetTenant())
	run.State = baagentv1.RunState_RUN_STATE_COMPLETED
	run.CreatedAt = timestamppb.Now()
	return &baagentv1.OrchestratorServiceListRunsResponse{Runs: []*baagentv1.Run{run}, NextPageToken: "tok-2"}, nil
}

// ctlEnv starts embedded NATS and the fake orchestrator and returns the
// environment pointing baagentctl at them.
func ctlEnv(t *testing.T, script []*baagentv1.Event) (*fakeOrchestrator, map[string]string) {
	t.Helper()
	srv, err := natsx.StartEmbedded(natsx.EmbeddedOptions{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := natsx.Provision(t.Context(), js, natsx.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	f := &fakeOrchestrator{js: js, script: script}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterOrchestratorServiceServer(gs, f) })
	return f, map[string]string{"BAAGENT_NATS_URL": srv.ClientURL(), "BAAGENT_ORCHESTRATOR_ADDR": conn.Target()}
}

// ctlRun runs one of this file's commands as main's run would, returning
// the exit status and output.
func ctlRun(ctx context.Context, env map[string]string, cmd func(context.Context, *cli, []string) error, args ...string) (int, string, string) {
	var out, errOut strings.Builder
	c := newCLI(strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	err := cmd(ctx, c, args)
	var ee exitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.code, out.String(), errOut.String()
	case errors.Is(err, errUsage):
		return 2, out.String(), errOut.String() + err.Error()
	default:
		return 1, out.String(), errOut.String() + err.Error()
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func completeScript(t *testing.T) []*baagentv1.Event {
	args, err := structpb.NewStruct(map[string]any{"query": "SELECT category, SUM(revenue) FROM sales GROUP BY 1"})
	if err != nil {
		t.Fatal(err)
	}
	return []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "scripted", ScriptedModel: true, MaxSteps: 50}}},
		{Step: 1, Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 1}}},
		{Step: 1, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "I will query "}}},
		{Step: 1, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "the sales."}}},
		{Step: 1, Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{Model: "scripted", Usage: &baagentv1.Usage{PromptTokens: 600, CompletionTokens: 40}}}},
		{Step: 1, Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: "I will query the sales."}}},
		{Step: 1, Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call_1", ToolName: "sql_query", ToolInput: args}}},
		{Step: 1, Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call_1", ToolName: "sql_query", Success: true, DurationMs: 12,
			OutputLevel: baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD, Observation: "Found 2 rows:\ncategory,revenue\nElectronics,125000\nFurniture,64000" + strings.Repeat(" padding", 60)}}},
		{Step: 1, Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: 1, Success: true}}},
		{Step: 2, Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 2}}},
		{Step: 2, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "Electronics led "}}},
		{Step: 2, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "with 125,000."}}},
		{Step: 2, Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: 2, Success: true}}},
		{Step: 2, Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "Electronics led with 125,000.", Format: "markdown",
			Metrics: &baagentv1.ConversationMetrics{TotalTokens: 1280, ToolCalls: []*baagentv1.ToolMetrics{{ToolName: "sql_query"}}}}}},
	}
}

func TestAskStreamsARunLive(t *testing.T) {
	ctx := testCtx(t)
	f, env := ctlEnv(t, completeScript(t))
	code, out, errOut := ctlRun(ctx, env, runAsk, "--model", "gpt-4o", "--conversation", "conv-cli", "--tenant", "acme", "Which category sold most?")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"run " + fakeRunID, "scripted model, not a real LLM", "── step 1", "I will query the sales.",
		`→ sql_query {"query":"SELECT category, SUM(revenue) FROM sales GROUP BY 1"}  [call_1]`,
		"← sql_query ok in 12.0 ms, standard  [call_1]", "Found 2 rows: category,revenue Electronics,125000", "more characters)",
		"600 tokens in, 40 out; cost unknown", "Electronics led with 125,000.", "completed in 2 steps",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "I will query the sales.") != 1 || strings.Count(out, "Electronics led with 125,000.") != 1 {
		t.Errorf("streamed text printed twice:\n%s", out)
	}
	s := f.started
	if s.GetTenant() != "acme" || s.GetSpec().GetModel() != "gpt-4o" || s.GetSpec().GetConversationId() != "conv-cli" || s.GetSpec().GetInput() != "Which category sold most?" {
		t.Errorf("StartRun request = %v", s)
	}
}

func TestAskJSON(t *testing.T) {
	ctx := testCtx(t)
	script := completeScript(t)
	_, env := ctlEnv(t, script)
	code, out, errOut := ctlRun(ctx, env, runAsk, "--json", "question")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(script) {
		t.Fatalf("%d lines for %d events:\n%s", len(lines), len(script), out)
	}
	for i, l := range lines {
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		if raw["run_id"] != fakeRunID || raw["type"] == nil || raw["seq"] == nil {
			t.Errorf("line %d lacks proto-named fields: %s", i, l)
		}
		ev := &baagentv1.Event{}
		if err := protojson.Unmarshal([]byte(l), ev); err != nil || ev.GetSeq() != uint64(i+1) {
			t.Errorf("line %d: %v seq %d", i, err, ev.GetSeq())
		}
	}
	if !strings.Contains(out, `"tool_call_id":"call_1"`) {
		t.Errorf("no proto field names:\n%s", out)
	}
}

func TestAskExitStatusOnError(t *testing.T) {
	ctx := testCtx(t)
	_, env := ctlEnv(t, []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m"}}},
		{Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: "PEER_UNIMPLEMENTED", Message: "the context service does not implement BuildWindow yet"}}},
	})
	code, out, _ := ctlRun(ctx, env, runAsk, "q")
	if code != 1 || !strings.Contains(out, "run failed: the context service does not implement BuildWindow yet (PEER_UNIMPLEMENTED)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestAskInterruptCancelsTheRun(t *testing.T) {
	ctx := testCtx(t)
	f, env := ctlEnv(t, []*baagentv1.Event{{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m"}}}})
	askCtx, interrupt := context.WithCancel(ctx)
	done := make(chan int, 1)
	var out string
	go func() {
		var code int
		code, out, _ = ctlRun(askCtx, env, runAsk, "q")
		done <- code
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		f.mu.Lock()
		started := f.started != nil
		f.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("run never started")
		}
		time.Sleep(time.Millisecond)
	}
	interrupt() // Ctrl-C
	code := <-done
	if code != exitCancelled || !strings.Contains(out, "run cancelled: interrupted in baagentctl") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if len(f.cancels) != 1 || f.cancels[0] != fakeRunID+": interrupted in baagentctl" {
		t.Errorf("cancels %v", f.cancels)
	}
}

func TestAskUsageAndUnreachable(t *testing.T) {
	ctx := testCtx(t)
	if code, _, _ := ctlRun(ctx, nil, runAsk); code != 2 {
		t.Errorf("no question: exit %d", code)
	}
	if code, _, _ := ctlRun(ctx, nil, runAsk, "a", "b"); code != 2 {
		t.Errorf("two questions: exit %d", code)
	}
	code, _, errOut := ctlRun(ctx, map[string]string{"BAAGENT_NATS_URL": "nats://127.0.0.1:1"}, runAsk, "--timeout=300ms", "q")
	if code != 1 || !strings.Contains(errOut, "nats://127.0.0.1:1") || !strings.Contains(errOut, "--nats-url") {
		t.Errorf("unreachable NATS: exit %d: %s", code, errOut)
	}
}

func TestRunsCommands(t *testing.T) {
	ctx := testCtx(t)
	_, env := ctlEnv(t, nil)
	code, out, errOut := ctlRun(ctx, env, runRuns, "list", "--conversation", "conv-cli", "--state", "completed")
	if code != 0 || !strings.Contains(out, fakeRunID) || !strings.Contains(out, "completed") || !strings.Contains(out, "--page-token tok-2") {
		t.Errorf("runs list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = ctlRun(ctx, env, runRuns, "list", "--json", "--conversation", "conv-cli", "--state", "completed")
	if code != 0 || !strings.Contains(out, `"next_page_token":"tok-2"`) || !strings.Contains(out, `"run_id":"`+fakeRunID+`"`) {
		t.Errorf("runs list --json: exit %d\n%s", code, out)
	}
	if code, _, _ := ctlRun(ctx, env, runRuns, "list", "--state", "sleeping"); code != 2 {
		t.Errorf("bad state: exit %d", code)
	}
	code, out, _ = ctlRun(ctx, env, runRuns, "get", fakeRunID)
	for _, want := range []string{"state         completed", "scripted model", "Electronics led with 125,000.", "Conversation Metrics Report", "sql_query:", "Input: 1,200"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs get lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	code, out, _ = ctlRun(ctx, env, runRuns, "cancel", "--reason", "enough", fakeRunID)
	if code != 0 || !strings.Contains(out, "is cancelled") {
		t.Errorf("runs cancel: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{}, {"get"}, {"cancel"}, {"frobnicate"}} {
		if code, _, _ := ctlRun(ctx, env, runRuns, args...); code != 2 {
			t.Errorf("runs %v: exit %d", args, code)
		}
	}
}

func TestShorten(t *testing.T) {
	if got := shorten("a\n b\tc", 10); got != "a b c" {
		t.Errorf("shorten = %q", got)
	}
	if got := shorten("héllo wörld", 5); got != "héllo… (6 more characters)" {
		t.Errorf("shorten = %q", got)
	}
}
