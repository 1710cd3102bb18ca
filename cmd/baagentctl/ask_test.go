package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/topology"
)

// The run commands are tested against the whole suite in-process (as
// main_test.go starts it), through the gateway only, with the scripted
// model and an API key mapped to the tenant `acme`.

const (
	testAPIKey = "cli-test-key-0123456789"
	testTenant = "acme"
	// revenueQuestion is answered by examples/scenarios/revenue-by-category.yaml:
	// one sql_query, then the answer.
	revenueQuestion = "Which product category had the highest revenue last quarter?"
	// clarifyQuestion is answered by clarifyScenario: a clarification
	// question, then an answer once it is answered.
	clarifyQuestion = "cli test: ask me which period"
)

// clarifyScenario pauses the run on a question that does not time out
// during a test, so that answering and cancelling can be exercised.
const clarifyScenario = `name: cli-clarify
description: baagentctl test; asks which period, then answers.
example: "cli test: ask me which period"
match:
  exact: ["cli test: ask me which period"]
turns:
  - text: I need the period first.
    tool_calls:
      - name: ask_clarification
        arguments:
          question_type: scope
          question: Which period should I analyse?
          options:
            - label: Q3
              is_recommended: true
            - label: Q4
          timeout_seconds: 600
  - text: "Analysed the period you chose: {{ .LastToolResult }}"
`

// startGatewaySuite runs -target=all in-process on loopback ports with the
// shipped scenarios plus clarifyScenario, and returns the environment
// pointing baagentctl at its gateway with the test API key.
func startGatewaySuite(t *testing.T) map[string]string {
	t.Helper()
	scenarios := t.TempDir()
	shipped, err := filepath.Glob("../../examples/scenarios/*.yaml")
	if err != nil || len(shipped) == 0 {
		t.Fatalf("shipped scenarios: %v (%d)", err, len(shipped))
	}
	for _, p := range shipped {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scenarios, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(scenarios, "cli-clarify.yaml"), []byte(clarifyScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, scenarios, "-api-keys="+testAPIKey+"="+testTenant)
	env := map[string]string{"BAAGENT_ADDR": a.Addr(topology.Gateway).String(), "BAAGENT_API_KEY": testAPIKey}
	// The suite is ready when the gateway lists runs.
	testkit.Eventually(t, 20*time.Second, "the gateway serving runs list", func() bool {
		code, _, _ := ctlRun(t.Context(), env, "runs", "list", "--timeout=2s")
		return code == 0
	})
	return env
}

// ctlRunIn runs baagentctl with the command path cmd (e.g. "runs list")
// and args through the real command tree, as main does, with stdin,
// returning the exit status and stderr; stdout may be read while it runs.
func ctlRunIn(ctx context.Context, env map[string]string, stdin string, stdout *testkit.SyncBuffer, cmd string, args ...string) (int, string) {
	var errOut strings.Builder
	code := run(ctx, append(strings.Fields(cmd), args...), strings.NewReader(stdin), stdout, &errOut, func(k string) string { return env[k] })
	return code, errOut.String()
}

func ctlRun(ctx context.Context, env map[string]string, cmd string, args ...string) (int, string, string) {
	var out testkit.SyncBuffer
	code, errOut := ctlRunIn(ctx, env, "", &out, cmd, args...)
	return code, out.String(), errOut
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// gatewayFor is a gateway client of env, for the test's own checks.
func gatewayFor(t *testing.T, env map[string]string) *gatewayClient {
	t.Helper()
	c := newCLI(nil, io.Discard, io.Discard, func(k string) string { return env[k] })
	gw, done, err := c.gateway(runFlags{apiKey: env["BAAGENT_API_KEY"]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return gw
}

// waitRun polls the run until ok holds for it.
func waitRun(t *testing.T, gw *gatewayClient, runID string, what string, ok func(*baagentv1.Run) bool) *baagentv1.Run {
	t.Helper()
	var last *baagentv1.Run
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("run %s getting %s", runID, what), func() bool {
		resp, err := gw.GetRun(gw.auth(t.Context()), &baagentv1.GetRunRequest{RunId: runID})
		if err == nil {
			last = resp.GetRun()
		}
		return err == nil && ok(last)
	})
	return last
}

func TestAskThroughTheGateway(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	env := startGatewaySuite(t)

	// Live view of a complete run.
	code, out, errOut := ctlRun(ctx, env, "ask", "--conversation", "conv-cli", revenueQuestion)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"run run_", "conversation conv-cli", "scripted model, not a real LLM", "── step 1", "I'll total 2026-Q3 revenue by product category with one query.",
		"→ sql_query {", "SELECT p.category AS category", "[call_revenue-by-category_", "← sql_query ok in ", "| Software | 2104842.9 | 176 |", "── step 2", "had the highest revenue last quarter",
		"tokens in", "; cost unknown)", "completed in 2 steps",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "I'll total 2026-Q3 revenue by product category with one query."); n != 1 {
		t.Errorf("streamed text printed %d times:\n%s", n, out)
	}

	// The run belongs to the key's tenant and is listed by the gateway.
	gw := gatewayFor(t, env)
	list, err := gw.ListRuns(gw.auth(ctx), &baagentv1.ListRunsRequest{ConversationId: "conv-cli"})
	if err != nil || len(list.GetRuns()) != 1 {
		t.Fatalf("ListRuns: %v %v", list, err)
	}
	run := list.GetRuns()[0]
	if run.GetTenant() != testTenant || run.GetInput() != revenueQuestion || run.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Errorf("run = %v", run)
	}

	// --json: one event envelope per line, each seq once and in order.
	code, out, errOut = ctlRun(ctx, env, "ask", "--json", revenueQuestion)
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 5 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	var runID string
	for i, l := range lines {
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		if raw["run_id"] == nil || raw["type"] == nil || raw["seq"] == nil || raw["tenant"] != testTenant {
			t.Errorf("line %d lacks proto-named fields: %s", i, l)
		}
		ev := &baagentv1.Event{}
		if err := protojson.Unmarshal([]byte(l), ev); err != nil || ev.GetSeq() != uint64(i+1) {
			t.Errorf("line %d: %v seq %d", i, err, ev.GetSeq())
		}
		if i == 0 {
			runID = ev.GetRunId()
		} else if ev.GetRunId() != runID {
			t.Errorf("line %d of run %s, want %s", i, ev.GetRunId(), runID)
		}
		if i == len(lines)-1 && ev.GetComplete() == nil {
			t.Errorf("last line is not the complete event: %s", l)
		}
	}
	if !strings.Contains(out, `"tool_call_id":"call_`) {
		t.Errorf("no proto field names:\n%s", out)
	}

	// A run that fails exits 1 and says why.
	code, out, _ = ctlRun(ctx, env, "ask", "--max-steps", "1", revenueQuestion)
	if code != 1 || !strings.Contains(out, "run failed: ") || !strings.Contains(out, "(MAX_STEPS)") {
		t.Errorf("failed run: exit %d:\n%s", code, out)
	}

	// A wrong key is refused by the gateway before any run starts.
	bad := map[string]string{"BAAGENT_ADDR": env["BAAGENT_ADDR"]}
	code, _, errOut = ctlRun(ctx, bad, "ask", "--api-key", "not-a-key", revenueQuestion)
	if code != 1 || !strings.Contains(errOut, "invalid API key") || !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("bad key: exit %d: %s", code, errOut)
	}
}

func TestAskAnswersTheQuestionAtThePrompt(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	env := startGatewaySuite(t)
	var out testkit.SyncBuffer
	code, errOut := ctlRunIn(ctx, env, "Q4\n", &out, "ask", clarifyQuestion)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut)
	}
	for _, want := range []string{"? Which period should I analyse?", "  - Q3 (recommended)", "  - Q4", "your answer (empty: let it time out) > ", "answer: Q4", "Analysed the period you chose:", "completed in 2 steps"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAskInterruptCancelsTheRun(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	env := startGatewaySuite(t)
	askCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	var out testkit.SyncBuffer
	done := make(chan int, 1)
	var errOut string
	go func() {
		var code int
		code, errOut = ctlRunIn(askCtx, env, "", &out, "ask", clarifyQuestion)
		done <- code
	}()
	// Interrupt once the prompt got no answer and the run waits on its
	// question.
	testkit.Eventually(t, 30*time.Second, "the unanswered question", func() bool { return strings.Contains(out.String(), "no answer given") })
	gw := gatewayFor(t, env)
	waiting, err := gw.ListRuns(gw.auth(ctx), &baagentv1.ListRunsRequest{})
	if err != nil || len(waiting.GetRuns()) != 1 {
		t.Fatalf("runs: %v %v", waiting, err)
	}
	waitRun(t, gw, waiting.GetRuns()[0].GetRunId(), "waiting_input", func(r *baagentv1.Run) bool { return r.GetState() == baagentv1.RunState_RUN_STATE_WAITING_INPUT })
	interrupt() // Ctrl-C
	code := <-done
	if code != exitCancelled || !strings.Contains(out.String(), "run cancelled: interrupted in baagentctl") {
		t.Fatalf("exit %d:\n%s\nstderr: %s", code, out.String(), errOut)
	}
	// The record is stored right after the terminal event the CLI saw.
	// GetRun follows the events and may report the end first; the listing
	// reads the records, so it is waited for too.
	waitRun(t, gw, waiting.GetRuns()[0].GetRunId(), "cancelled", func(r *baagentv1.Run) bool { return r.GetState() == baagentv1.RunState_RUN_STATE_CANCELLED })
	var list *baagentv1.ListRunsResponse
	testkit.Eventually(t, 30*time.Second, "one cancelled run listed", func() bool {
		list, err = gw.ListRuns(gw.auth(ctx), &baagentv1.ListRunsRequest{States: []baagentv1.RunState{baagentv1.RunState_RUN_STATE_CANCELLED}})
		return err == nil && len(list.GetRuns()) == 1
	})
}

func TestAskUsageAndUnreachable(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	if code, _, _ := ctlRun(ctx, nil, "ask"); code != 2 {
		t.Errorf("no question: exit %d", code)
	}
	if code, _, _ := ctlRun(ctx, nil, "ask", "a", "b"); code != 2 {
		t.Errorf("two questions: exit %d", code)
	}
	if code, _, _ := ctlRun(ctx, nil, "ask", "--nats-url", "nats://127.0.0.1:4222", "q"); code != 2 {
		t.Errorf("--nats-url is gone, yet accepted: exit %d", code)
	}
	code, _, errOut := ctlRun(ctx, map[string]string{"BAAGENT_ADDR": "127.0.0.1:1"}, "ask", "--timeout=300ms", "q")
	if code != 1 || !strings.Contains(errOut, "start run at 127.0.0.1:1") {
		t.Errorf("unreachable gateway: exit %d: %s", code, errOut)
	}
}

func TestRunsAndInputThroughTheGateway(t *testing.T) {
	t.Parallel()

	ctx := testCtx(t)
	env := startGatewaySuite(t)
	gw := gatewayFor(t, env)
	start := func(input, conversation string) string {
		resp, err := gw.StartRun(gw.auth(ctx), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: input, ConversationId: conversation}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetRun().GetRunId()
	}
	waiting := func(r *baagentv1.Run) bool { return r.GetState() == baagentv1.RunState_RUN_STATE_WAITING_INPUT }

	// input answers the question the run waits on; the run completes.
	answered := start(clarifyQuestion, "conv-cli")
	waitRun(t, gw, answered, "waiting_input", waiting)
	code, out, errOut := ctlRun(ctx, env, "input", answered, "Q4")
	if code != 0 || !strings.Contains(out, "answered q") || !strings.Contains(out, "of run "+answered+": Q4") {
		t.Fatalf("input: exit %d\n%s%s", code, out, errOut)
	}
	waitRun(t, gw, answered, "completed", func(r *baagentv1.Run) bool { return r.GetState() == baagentv1.RunState_RUN_STATE_COMPLETED })
	code, _, errOut = ctlRun(ctx, env, "input", answered, "Q3")
	if code != 1 || !strings.Contains(errOut, "waits on no question") {
		t.Errorf("input to a completed run: exit %d: %s", code, errOut)
	}

	// runs list filters by conversation and state, in a table or JSON.
	code, out, errOut = ctlRun(ctx, env, "runs", "list", "--conversation", "conv-cli", "--state", "completed")
	if code != 0 || !strings.Contains(out, answered) || !strings.Contains(out, "completed") || !strings.Contains(out, "RUN_ID") {
		t.Errorf("runs list: exit %d\n%s%s", code, out, errOut)
	}
	start(revenueQuestion, "conv-other")
	code, out, _ = ctlRun(ctx, env, "runs", "list", "--json", "--page-size", "1")
	var page struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
		NextPageToken string `json:"next_page_token"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Runs) != 1 || page.Runs[0].RunID == "" || page.NextPageToken == "" {
		t.Errorf("runs list --json --page-size 1: exit %d\n%s", code, out)
	}
	code, out, _ = ctlRun(ctx, env, "runs", "list", "--page-size", "1")
	if code != 0 || !strings.Contains(out, "more: baagentctl runs list --page-token ") {
		t.Errorf("runs list --page-size 1: exit %d\n%s", code, out)
	}
	if code, _, _ := ctlRun(ctx, env, "runs", "list", "--state", "sleeping"); code != 2 {
		t.Errorf("bad state: exit %d", code)
	}

	// runs get shows the record and its metrics report.
	code, out, _ = ctlRun(ctx, env, "runs", "get", answered)
	for _, want := range []string{"state         completed", "scripted model", "Analysed the period you chose:", "Conversation Metrics Report", "conv-cli"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs get lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	code, out, _ = ctlRun(ctx, env, "runs", "get", "--json", answered)
	if code != 0 || !strings.Contains(out, `"run_id":"`+answered+`"`) || !strings.Contains(out, `"tenant":"`+testTenant+`"`) {
		t.Errorf("runs get --json: exit %d\n%s", code, out)
	}
	code, _, errOut = ctlRun(ctx, env, "runs", "get", "run_does_not_exist")
	if code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("runs get of an unknown run: exit %d: %s", code, errOut)
	}

	// runs cancel stops a waiting run.
	cancelled := start(clarifyQuestion, "conv-cancel")
	waitRun(t, gw, cancelled, "waiting_input", waiting)
	code, out, _ = ctlRun(ctx, env, "runs", "cancel", "--reason", "enough", cancelled)
	if code != 0 || !strings.Contains(out, "run "+cancelled+" is cancelled") {
		t.Errorf("runs cancel: exit %d\n%s", code, out)
	}

	// Another tenant's key does not see the runs.
	code, _, errOut = ctlRun(ctx, map[string]string{"BAAGENT_ADDR": env["BAAGENT_ADDR"], "BAAGENT_API_KEY": "wrong"}, "runs", "get", answered)
	if code != 1 || !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("runs get with a wrong key: exit %d: %s", code, errOut)
	}

	for _, args := range [][]string{{}, {"get"}, {"cancel"}, {"frobnicate"}} {
		if code, _, _ := ctlRun(ctx, env, "runs", args...); code != 2 {
			t.Errorf("runs %v: exit %d", args, code)
		}
	}
}

func TestGatewayClientSendsTheKey(t *testing.T) {
	t.Parallel()

	gw := &gatewayClient{apiKey: "k1"}
	md, _ := metadata.FromOutgoingContext(gw.auth(context.Background()))
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer k1" {
		t.Errorf("authorization = %v", got)
	}
	md, _ = metadata.FromOutgoingContext((&gatewayClient{}).auth(context.Background()))
	if len(md.Get("authorization")) != 0 {
		t.Errorf("no key, yet authorization %v", md.Get("authorization"))
	}
}

func TestResumableStreamErrors(t *testing.T) {
	t.Parallel()

	slow := status.New(codes.ResourceExhausted, "slow_consumer: the client fell too far behind")
	slow, err := slow.WithDetails(&errdetails.ErrorInfo{Reason: "SLOW_CONSUMER", Domain: "baagent.dev"}, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{slow.Err(), true},
		{status.Error(codes.Unavailable, "the gateway is shutting down"), true},
		{status.Error(codes.ResourceExhausted, "too many event feeds"), false},
		{status.Error(codes.NotFound, "no such run"), false},
		{status.Error(codes.Canceled, "context canceled"), false},
		{errors.New("not a status"), false},
	} {
		if got := resumable(tc.err); got != tc.want {
			t.Errorf("resumable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if d := resumeDelay(slow.Err()); d != time.Second {
		t.Errorf("resumeDelay = %s, want the RetryInfo's 1s", d)
	}
	huge, _ := status.New(codes.ResourceExhausted, "slow_consumer").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Hour)})
	if d := resumeDelay(huge.Err()); d != maxResumeDelay {
		t.Errorf("resumeDelay = %s, want the cap %s", d, maxResumeDelay)
	}
}

// scriptedStream serves a fixed list of events, then err.
type scriptedStream struct {
	baagentv1.GatewayService_StreamRunEventsClient
	events []*baagentv1.Event
	err    error
}

func (s *scriptedStream) Recv() (*baagentv1.StreamRunEventsResponse, error) {
	if len(s.events) == 0 {
		return nil, s.err
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return &baagentv1.StreamRunEventsResponse{Event: ev}, nil
}

// TestShorten checks the one-line preview of observations.
func TestShorten(t *testing.T) {
	t.Parallel()

	if got := shorten("a\n b\tc", 10); got != "a b c" {
		t.Errorf("shorten = %q", got)
	}
	if got := shorten("héllo wörld", 5); got != "héllo… (6 more characters)" {
		t.Errorf("shorten = %q", got)
	}
}

// resumingGateway serves one scripted stream per StreamRunEvents call and
// records the cursors asked for.
type resumingGateway struct {
	baagentv1.GatewayServiceClient
	streams []*scriptedStream
	afters  []string
}

func (g *resumingGateway) StreamRunEvents(_ context.Context, req *baagentv1.StreamRunEventsRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[baagentv1.StreamRunEventsResponse], error) {
	g.afters = append(g.afters, req.GetAfter())
	if len(g.streams) == 0 {
		return nil, status.Error(codes.Internal, "no more streams")
	}
	s := g.streams[0]
	g.streams = g.streams[1:]
	return s, nil
}

func TestFollowRunResumesAfterASlowConsumerCut(t *testing.T) {
	t.Parallel()

	slow, err := status.New(codes.ResourceExhausted, "slow_consumer: resume with after=c2").
		WithDetails(&errdetails.ErrorInfo{Reason: "SLOW_CONSUMER", Domain: "baagent.dev"}, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(seq uint64, p *baagentv1.Event) *baagentv1.Event {
		p.Seq, p.RunId, p.Cursor = seq, "run_1", "c"+string(rune('0'+seq))
		return p
	}
	start := func() *baagentv1.Event {
		return &baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m"}}}
	}
	step := func() *baagentv1.Event {
		return &baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 1}}}
	}
	g := &resumingGateway{streams: []*scriptedStream{
		{events: []*baagentv1.Event{ev(1, start()), ev(2, step())}, err: slow.Err()},
		// The resumed stream repeats event 2 and says its first cursor
		// was no longer retained: neither is shown again.
		{events: []*baagentv1.Event{
			{Cursor: "c1", Payload: &baagentv1.Event_StreamReset{StreamReset: &baagentv1.StreamResetPayload{RequestedCursor: "c2"}}},
			ev(2, step()),
			ev(3, &baagentv1.Event{Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "done"}}}),
		}, err: io.EOF},
	}}
	var out strings.Builder
	c := newCLI(nil, &out, io.Discard, func(string) string { return "" })
	last, err := followRun(t.Context(), c, &gatewayClient{GatewayServiceClient: g}, "run_1", &jsonView{w: &out})
	if err != nil || last.GetComplete() == nil {
		t.Fatalf("followRun = %v, %v\n%s", last, err, out.String())
	}
	if len(g.afters) != 2 || g.afters[0] != "earliest" || g.afters[1] != "c2" {
		t.Errorf("streams opened after %q, want earliest then c2", g.afters)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Contains(out.String(), "stream_reset") {
		t.Errorf("%d events shown, want 3 without the reset:\n%s", len(lines), out.String())
	}

	// A stream that keeps failing without new events is given up.
	g = &resumingGateway{}
	for range maxResumes + 1 {
		g.streams = append(g.streams, &scriptedStream{err: status.Error(codes.Unavailable, "down")})
	}
	if _, err := followRun(t.Context(), c, &gatewayClient{GatewayServiceClient: g}, "run_1", &jsonView{w: io.Discard}); err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("endless failures: %v", err)
	}
}

// preStreamGateway is a gateway from before StartRunStream: it starts one
// run and streams it, reporting the cursor it was asked for.
type preStreamGateway struct {
	baagentv1.UnimplementedGatewayServiceServer
	after chan string
}

func (g *preStreamGateway) StartRun(context.Context, *baagentv1.StartRunRequest) (*baagentv1.StartRunResponse, error) {
	return &baagentv1.StartRunResponse{Run: &baagentv1.Run{RunId: "run_1", ConversationId: "conv_1", State: baagentv1.RunState_RUN_STATE_QUEUED}}, nil
}

func (g *preStreamGateway) StreamRunEvents(req *baagentv1.StreamRunEventsRequest, stream grpc.ServerStreamingServer[baagentv1.StreamRunEventsResponse]) error {
	g.after <- req.GetAfter()
	return stream.Send(&baagentv1.StreamRunEventsResponse{Event: &baagentv1.Event{
		RunId: req.GetRunId(), Seq: 1, Cursor: "1", Type: "complete",
		Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "the answer from an older gateway"}},
	}})
}

// TestAskFallsBackToStartRunOnAnOlderGateway: a gateway without
// StartRunStream answers Unimplemented before starting anything; ask then
// starts the run with StartRun and follows it from `earliest`.
func TestAskFallsBackToStartRunOnAnOlderGateway(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &preStreamGateway{after: make(chan string, 4)}
	srv := grpc.NewServer()
	baagentv1.RegisterGatewayServiceServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	code, out, errOut := ctlRun(testCtx(t), map[string]string{"BAAGENT_ADDR": lis.Addr().String()}, "ask", "q")
	if code != 0 || !strings.Contains(out, "the answer from an older gateway") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if after := <-g.after; after != "earliest" {
		t.Fatalf("followed from cursor %q, want earliest", after)
	}
}
