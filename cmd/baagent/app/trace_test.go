package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/baagent/baagent/internal/tracing"
)

// traced starts -target=all exporting every span, as it ends, to an
// in-memory exporter, and returns the gateway's HTTP base URL.
func traced(t *testing.T, ctx context.Context, extra ...string) (*tracetest.InMemoryExporter, string) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	cfg := mustLoad(t, testArgs(t, extra...))
	a := startServing(t, ctx, cfg, WithTracing(func(c *tracing.Config) {
		c.Exporter, c.Sync = exp, true
	}))
	return exp, "http://" + a.GatewayHTTPAddr().String()
}

type runView struct {
	RunID   string `json:"run_id"`
	State   string `json:"state"`
	TraceID string `json:"trace_id"`
}

func httpJSON(ctx context.Context, t *testing.T, method, url, body string, out any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
}

// runToEnd starts a run over the gateway and waits until it has ended.
func runToEnd(ctx context.Context, t *testing.T, base, input string) runView {
	t.Helper()
	var started struct{ Run runView }
	httpJSON(ctx, t, http.MethodPost, base+"/v1/runs", fmt.Sprintf(`{"spec":{"input":%q}}`, input), &started)
	for {
		var got struct{ Run runView }
		httpJSON(ctx, t, http.MethodGet, base+"/v1/runs/"+started.Run.RunID, "", &got)
		switch got.Run.State {
		case "RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED":
			return got.Run
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s still %s: %v", started.Run.RunID, got.Run.State, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// spansOf waits until the trace holds an ended "run" span whose run id
// is runID, then returns the trace's spans.
func spansOf(ctx context.Context, t *testing.T, exp *tracetest.InMemoryExporter, traceID, runID string) tracetest.SpanStubs {
	t.Helper()
	for {
		var out tracetest.SpanStubs
		done := false
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() != traceID {
				continue
			}
			out = append(out, s)
			if s.Name == "run" && attr(s, "baagent.run_id").AsString() == runID {
				done = true
			}
		}
		if done {
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no ended run span for %s in trace %s: %v", runID, traceID, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// tree indexes a trace's spans by span id.
type tree map[trace.SpanID]tracetest.SpanStub

func newTree(spans tracetest.SpanStubs) tree {
	tr := tree{}
	for _, s := range spans {
		tr[s.SpanContext.SpanID()] = s
	}
	return tr
}

func (tr tree) parent(s tracetest.SpanStub) (tracetest.SpanStub, bool) {
	p, ok := tr[s.Parent.SpanID()]
	return p, ok
}

func (tr tree) named(prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// The span tree of a scripted run in -target=all: the HTTP request that
// started it is the root; StartRun below it; the run's execution below
// StartRun (its context travelled in the run-queue item's headers);
// steps below the run; the context window, the model call (GenAI
// attributes, with its HTTP request below it) and the tool calls below the
// steps, with the peers' RPC spans below them. A failed tool call is
// recorded as an error. The run record carries the trace id.
func TestTraceOfARunIsOneTree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exp, base := traced(t, ctx)

	// One sql_query fails (a column that does not exist), then succeeds.
	run := runToEnd(ctx, t, base, "What was the average order value by region in 2026?")
	if run.State != "RUN_STATE_COMPLETED" {
		t.Fatalf("run ended %s", run.State)
	}
	if len(run.TraceID) != 32 {
		t.Fatalf("run record trace_id %q, want 32 hex digits", run.TraceID)
	}
	tr := newTree(spansOf(ctx, t, exp, run.TraceID, run.RunID))

	roots := 0
	for _, s := range tr {
		if _, ok := tr.parent(s); !ok {
			roots++
			if s.Name != "POST /v1/runs" || s.Parent.IsValid() {
				t.Errorf("root span %q (parent %v), want the gateway's POST /v1/runs", s.Name, s.Parent.SpanID())
			}
		}
	}
	if roots != 1 {
		t.Errorf("%d roots in the trace, want 1", roots)
	}
	runs := tr.named("run")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1", len(runs))
	}
	rs := runs[0]
	if p, ok := tr.parent(rs); !ok || p.Name != "baagent.v1.OrchestratorService/StartRun" {
		t.Errorf("run span's parent %q, want StartRun", p.Name)
	}
	if rs.SpanKind != trace.SpanKindConsumer || attr(rs, "baagent.run.outcome").AsString() != "ended" || attr(rs, "baagent.run.state").AsString() != "completed" {
		t.Errorf("run span kind %v attributes %v", rs.SpanKind, rs.Attributes)
	}

	steps := tr.named("step")
	if len(steps) < 2 {
		t.Fatalf("%d step spans, want at least 2", len(steps))
	}
	for _, s := range steps {
		if p, _ := tr.parent(s); p.SpanContext.SpanID() != rs.SpanContext.SpanID() {
			t.Errorf("step %d's parent is %q, want the run", attr(s, "baagent.step").AsInt64(), p.Name)
		}
	}
	underStep := func(s tracetest.SpanStub) bool {
		p, ok := tr.parent(s)
		return ok && p.Name == "step"
	}

	chats := tr.named("chat ")
	if len(chats) != len(steps) {
		t.Errorf("%d model call spans for %d steps", len(chats), len(steps))
	}
	for _, c := range chats {
		if !underStep(c) || c.SpanKind != trace.SpanKindClient {
			t.Errorf("model span %q not a client span under a step", c.Name)
		}
		if attr(c, "gen_ai.operation.name").AsString() != "chat" || attr(c, "gen_ai.request.model").AsString() == "" ||
			attr(c, "gen_ai.usage.input_tokens").AsInt64() <= 0 || attr(c, "gen_ai.usage.output_tokens").AsInt64() <= 0 ||
			len(attr(c, "gen_ai.response.finish_reasons").AsStringSlice()) != 1 {
			t.Errorf("model span attributes %v", c.Attributes)
		}
		http := 0
		for _, s := range tr {
			if p, ok := tr.parent(s); ok && p.SpanContext.SpanID() == c.SpanContext.SpanID() && s.SpanKind == trace.SpanKindClient {
				http++
			}
		}
		if http == 0 {
			t.Errorf("model span %q has no HTTP client span below it", c.Name)
		}
	}

	windows := tr.named("build_window")
	if len(windows) != len(steps) {
		t.Errorf("%d build_window spans for %d steps", len(windows), len(steps))
	}
	for _, w := range windows {
		if !underStep(w) || attr(w, "baagent.context.strategy").AsString() == "" || attr(w, "baagent.context.tokens_after").AsInt64() <= 0 {
			t.Errorf("build_window span: under a step %v, attributes %v", underStep(w), w.Attributes)
		}
	}
	for _, s := range tr.named("baagent.v1.ContextService/BuildWindow") {
		if p, _ := tr.parent(s); p.Name != "build_window" || attr(s, "baagent.context.tokens_before").AsInt64() <= 0 {
			t.Errorf("BuildWindow RPC span under %q, attributes %v", p.Name, s.Attributes)
		}
	}

	tools := tr.named("execute_tool ")
	failed := 0
	for _, s := range tools {
		if !underStep(s) || attr(s, "gen_ai.tool.name").AsString() != "sql_query" || attr(s, "gen_ai.tool.call.id").AsString() == "" ||
			attr(s, "baagent.tool.output_level").Type() != attribute.STRING || attr(s, "baagent.tool.cached").Type() != attribute.BOOL ||
			attr(s, "baagent.tool.retry_count").Type() != attribute.INT64 {
			t.Errorf("tool span %q attributes %v", s.Name, s.Attributes)
		}
		if s.Status.Code == codes.Error {
			failed++
			if attr(s, "error.type").AsString() == "" {
				t.Errorf("failed tool span without error.type: %v", s.Attributes)
			}
		}
		rpc := false
		for _, c := range tr.named("baagent.v1.ToolRunnerService/Invoke") {
			if p, _ := tr.parent(c); p.SpanContext.SpanID() == s.SpanContext.SpanID() {
				rpc = true
			}
		}
		if !rpc {
			t.Errorf("tool span %q has no Invoke RPC below it", s.Name)
		}
	}
	if len(tools) < 2 || failed != 1 {
		t.Errorf("%d tool spans, %d failed: want the failing query and its correction", len(tools), failed)
	}
}

// A skill activation is a span under its step, and the run's events carry
// the run's trace id.
func TestTraceOfASkillActivationAndEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exp, base := traced(t, ctx)
	run := runToEnd(ctx, t, base, "Check the orders data for quality problems before we analyse it.")
	tr := newTree(spansOf(ctx, t, exp, run.TraceID, run.RunID))
	skills := tr.named("activate_skill")
	if len(skills) != 1 || attr(skills[0], "baagent.skill.name").AsString() != "data-quality-check" {
		t.Fatalf("skill spans %v", skills)
	}
	if p, _ := tr.parent(skills[0]); p.Name != "step" {
		t.Errorf("skill span under %q, want a step", p.Name)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+run.RunID+"/events?cursor=earliest", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body) // the stream ends after the terminal event
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		payload, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		var ev struct {
			Seq     string `json:"seq"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(payload), &ev); err != nil || ev.Seq == "" {
			continue
		}
		n++
		if ev.TraceID != run.TraceID {
			t.Fatalf("event %s has trace_id %q, want %s", ev.Seq, ev.TraceID, run.TraceID)
		}
	}
	if n == 0 {
		t.Fatal("no events")
	}
}

// With sampling never, nothing is exported and runs carry no trace id.
func TestTraceSamplingNever(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exp, base := traced(t, ctx, "-trace-sampling=never")
	run := runToEnd(ctx, t, base, "Which product category had the highest revenue last quarter?")
	if run.TraceID != "" {
		t.Errorf("unsampled run has trace_id %q", run.TraceID)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported with sampling never", n)
	}
}
