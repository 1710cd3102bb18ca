package toolrunner

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// fakeClock advances only when told to, or by the delays the pipeline
// sleeps, which it records instead of waiting.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_780_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// funcTool is a test tool whose Execute is a function.
type funcTool struct {
	spec  tool.Spec
	fn    func(ctx context.Context, c tool.Call) (tool.Result, error)
	calls atomic.Int32
}

func (t *funcTool) Spec() tool.Spec { return t.spec }
func (t *funcTool) Execute(ctx context.Context, c tool.Call) (tool.Result, error) {
	t.calls.Add(1)
	return t.fn(ctx, c)
}

// source is a tool.Source whose tools the test changes.
type source struct {
	mu    sync.Mutex
	tools []tool.Tool
}

func (s *source) Name() string { return "test" }
func (s *source) Tools() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tool.Tool(nil), s.tools...)
}
func (s *source) set(ts ...tool.Tool) {
	s.mu.Lock()
	s.tools = ts
	s.mu.Unlock()
}

type testEnv struct {
	opts   Options
	clock  *fakeClock
	source *source
	reg    *prometheus.Registry
}

// newTestServer builds a Server on temporary directories, a fake clock
// and a test source, after letting mutate change the options.
func newTestServer(tb testing.TB, mutate func(*Options)) (*Server, *testEnv) {
	tb.Helper()
	dir := tb.TempDir()
	env := &testEnv{clock: newFakeClock(), source: &source{}, reg: prometheus.NewRegistry()}
	env.opts = Options{
		Logger:       slog.New(slog.DiscardHandler),
		Registerer:   env.reg,
		WorkspaceDir: filepath.Join(dir, "workspaces"),
		ArtifactDir:  filepath.Join(dir, "artifacts"),
		Clock:        env.clock,
		Sources:      []tool.Source{env.source},
	}
	if mutate != nil {
		mutate(&env.opts)
	}
	s, err := New(env.opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, env
}

// echoSpec is the spec of a read-only test tool taking {"x": string}.
func echoSpec(name string) tool.Spec {
	return tool.Spec{
		Name: name, Description: "test tool", Version: "1.0.0", ReadOnly: true, Source: "test",
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`),
	}
}

// req is a valid invocation of name with args.
func req(name string, args map[string]any) *baagentv1.ToolInvocationRequest {
	p, err := structpb.NewStruct(args)
	if err != nil {
		panic(err)
	}
	return &baagentv1.ToolInvocationRequest{
		ToolCallId: "call_1", ToolName: name, Parameters: p, CallerId: "agent",
		Tenant: "acme", ConversationId: "conv-1",
	}
}

func mustInvoke(tb testing.TB, s *Server, r *baagentv1.ToolInvocationRequest) *baagentv1.ToolExecutionResult {
	tb.Helper()
	resp, err := s.Invoke(context.Background(), &baagentv1.InvokeRequest{Request: r})
	if err != nil {
		tb.Fatalf("Invoke: %v", err)
	}
	if resp.GetResult().GetToolCallId() != r.GetToolCallId() {
		tb.Fatalf("tool_call_id %q, want %q", resp.GetResult().GetToolCallId(), r.GetToolCallId())
	}
	return resp.GetResult()
}
