package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	"github.com/baagent/baagent/core/toolerror"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcinproc"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/orchestrator/internal/mirror"
	"github.com/baagent/baagent/services/skills"
	"github.com/baagent/baagent/services/tokens"
)

// The harness runs the orchestrator against an embedded JetStream, the real
// tokens and skills services (committed) over loopback gRPC, and in-process
// gRPC fakes of the context and toolrunner services (not committed yet),
// with a scripted test model.

const testTenant = "orchestrator-test"

// pricedModelYAML gives the tokens service a model of its own with prices,
// so cost accounting can be checked with round numbers.
const pricedModelYAML = `
models:
  priced-model:
    context_length: 32000
    max_output_tokens: 4096
    input_cost_per_1m: 2.5
    output_cost_per_1m: 10
`

// testCtx bounds a test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startJetStream starts an embedded NATS with the streams provisioned.
func startJetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return connectProvisioned(ctx, t, natstest.StartNATS(t).ClientURL())
}

// connectProvisioned connects to the NATS server at url, closed when the
// test ends, and provisions the streams and buckets.
func connectProvisioned(ctx context.Context, t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := natsx.Provision(ctx, js, natsx.ProvisionConfig{}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// harness is a running orchestrator with its peers.
type harness struct {
	t      testing.TB
	js     jetstream.JetStream
	srv    *Server
	client baagentv1.OrchestratorServiceClient
	ctxSvc *fakeContext
	tools  *fakeToolRunner
	model  *scriptedModel
	reg    *prometheus.Registry
	opts   Options
	stop   func() // stops Run and waits for it; idempotent
}

type harnessOptions struct {
	context    baagentv1.ContextServiceServer    // default: a fakeContext
	toolrunner baagentv1.ToolRunnerServiceServer // default: h.tools
	mutate     func(*Options)
	// real, when set, builds the context and toolrunner services to use
	// instead of the fakes.
	real func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer)
	// inproc connects the peers through an in-process channel, as
	// -target=all does, instead of loopback gRPC.
	inproc bool
	// tp traces the in-process peer calls (as -target=all does with
	// tracing on); set Options.TracerProvider with mutate too.
	tp trace.TracerProvider
}

// servePeers makes the services register registers callable: over
// loopback gRPC, or in process.
func servePeers(t testing.TB, inproc bool, tp trace.TracerProvider, register func(grpc.ServiceRegistrar)) grpc.ClientConnInterface {
	if !inproc {
		return vt.Serve(t, register)
	}
	ch := grpcinproc.New(grpcinproc.Options{TracerProvider: tp})
	t.Cleanup(ch.Close)
	register(ch)
	return ch
}

func newHarness(t testing.TB, turns turnFunc, ho harnessOptions) *harness {
	t.Helper()
	_, js := startJetStream(t)
	h := &harness{t: t, js: js, ctxSvc: newFakeContext(), tools: newFakeToolRunner(), model: &scriptedModel{turn: turns}, reg: prometheus.NewRegistry()}
	encoders := filepath.Join(t.TempDir(), "token_encoders.yaml")
	if err := os.WriteFile(encoders, []byte(pricedModelYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.New(tokens.Options{Logger: slog.New(slog.DiscardHandler), EncodersFile: encoders})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := skills.New(skills.Options{Logger: slog.New(slog.DiscardHandler), Root: "../../examples/skills"})
	if err != nil {
		t.Fatal(err)
	}
	base := servePeers(t, ho.inproc, ho.tp, func(gs grpc.ServiceRegistrar) {
		tok.Register(gs)
		sk.Register(gs)
	})
	var ctxSvc baagentv1.ContextServiceServer = h.ctxSvc
	if ho.context != nil {
		ctxSvc = ho.context
	}
	var trSvc baagentv1.ToolRunnerServiceServer = h.tools
	if ho.toolrunner != nil {
		trSvc = ho.toolrunner
	}
	if ho.real != nil {
		ctxSvc, trSvc = ho.real(t, js, baagentv1.NewTokensServiceClient(base))
	}
	peers := servePeers(t, ho.inproc, ho.tp, func(gs grpc.ServiceRegistrar) {
		baagentv1.RegisterContextServiceServer(gs, ctxSvc)
		baagentv1.RegisterToolRunnerServiceServer(gs, trSvc)
	})
	opts := Options{
		Logger:            slog.New(slog.DiscardHandler),
		Registerer:        h.reg,
		JetStream:         js,
		Context:           baagentv1.NewContextServiceClient(peers),
		Skills:            baagentv1.NewSkillsServiceClient(base),
		ToolRunner:        baagentv1.NewToolRunnerServiceClient(peers),
		Tokens:            baagentv1.NewTokensServiceClient(base),
		Model:             h.model,
		ScriptedModel:     true,
		DefaultModel:      "gpt-4o",
		MaxConcurrentRuns: 4,
		Replica:           "test-replica",
	}
	if ho.mutate != nil {
		ho.mutate(&opts)
	}
	h.opts = opts
	h.srv, h.stop = runReplica(t, opts)
	h.client = baagentv1.NewOrchestratorServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { h.srv.Register(gs) }))
	return h
}

// runReplica starts a Server with opts and its Run loop; the returned
// function stops it and waits (idempotent, also run at cleanup).
func runReplica(t testing.TB, opts Options) (*Server, func()) {
	srv := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(stop)
	return srv, stop
}

// replica starts another orchestrator replica on the harness's JetStream
// and peers, with its own gRPC client.
func (h *harness) replica(name string) (*Server, baagentv1.OrchestratorServiceClient, func()) {
	opts := h.opts
	opts.Replica = name
	opts.Registerer = nil
	srv, stop := runReplica(h.t, opts)
	return srv, baagentv1.NewOrchestratorServiceClient(vt.Serve(h.t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })), stop
}

// start starts a run and returns it.
func (h *harness) start(ctx context.Context, spec *baagentv1.RunSpec) *baagentv1.Run {
	h.t.Helper()
	resp, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: spec})
	if err != nil {
		h.t.Fatalf("StartRun: %v", err)
	}
	return resp.GetRun()
}

// events reads a run's events from JetStream until the terminal one, or
// fails the test at the context's deadline.
func (h *harness) events(ctx context.Context, runID string) []*baagentv1.Event {
	h.t.Helper()
	return readEvents(ctx, h.t, h.js, testTenant, runID)
}

func readEvents(ctx context.Context, t testing.TB, js jetstream.JetStream, tenant, runID string) []*baagentv1.Event {
	t.Helper()
	subject, err := natsx.EventSubject(tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, natsx.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*baagentv1.Event
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("run %s: waiting for events after %d: %v (got %v)", runID, len(out), err, types(out))
		}
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(msg.Data(), ev); err != nil {
			t.Fatal(err)
		}
		// A repaired event carries <run_id>:<seq>:<generation>; a
		// sub-agent's event mirrored here <run_id>:<child>:<child_seq>.
		want := runevent.MsgID(runID, ev.GetSeq())
		if child, childSeq, ok := mirror.ParseMirrorOf(msg.Headers().Get(mirror.HeaderMirrorOf)); ok {
			want = runevent.MirrorMsgID(runID, child, childSeq)
		}
		if got := msg.Headers().Get(jetstream.MsgIDHeader); got != want && !strings.HasPrefix(got, want+":") {
			t.Errorf("Nats-Msg-Id = %q, want %q", got, want)
		}
		out = append(out, ev)
		if runevent.IsTerminal(ev) {
			return out
		}
	}
}

func types(evs []*baagentv1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.GetType()
	}
	return out
}

// checkEnvelope asserts the invariants of every run's event stream:
// contiguous seq from 1, the envelope's ids, type equal to the payload,
// start first and exactly one terminal event, last.
func checkEnvelope(t testing.TB, run *baagentv1.Run, evs []*baagentv1.Event) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	terminals := 0
	for i, e := range evs {
		if e.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d; types %v", i, e.GetSeq(), types(evs))
		}
		if e.GetRunId() != run.GetRunId() || e.GetTenant() != run.GetTenant() || e.GetConversationId() != run.GetConversationId() {
			t.Errorf("event %d envelope %s/%s/%s, want %s/%s/%s", i, e.GetTenant(), e.GetRunId(), e.GetConversationId(), run.GetTenant(), run.GetRunId(), run.GetConversationId())
		}
		if e.GetType() == "" || e.GetType() != runevent.Type(e) {
			t.Errorf("event %d type %q, payload %q", i, e.GetType(), runevent.Type(e))
		}
		if e.GetTs() == nil {
			t.Errorf("event %d has no ts", i)
		}
		if runevent.IsTerminal(e) {
			terminals++
		}
	}
	if terminals != 1 || !runevent.IsTerminal(evs[len(evs)-1]) {
		t.Errorf("want exactly one terminal event, last; got %v", types(evs))
	}
}

// waitRun polls GetRun until the run is finished.
func (h *harness) waitRun(ctx context.Context, runID string) *baagentv1.Run {
	h.t.Helper()
	var run *baagentv1.Run
	testkit.Eventually(h.t, remaining(ctx), "run "+runID+" finished", func() bool {
		resp, err := h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: runID})
		run = resp.GetRun()
		return err == nil && isFinished(run.GetState())
	})
	return run
}

// remaining is the time left before ctx's deadline, for testkit.Eventually
// (tests bound their waits by their context).
func remaining(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Minute
}

// endWatcher learns when runs reach a finished record, for benchmarks:
// one core NATS subscription to the runs bucket's subjects, so waiting
// costs no round trip per run (polling would add its own latency).
type endWatcher struct {
	sub      *nats.Subscription
	mu       sync.Mutex
	finished map[string]bool          // finished before anyone waited
	waiting  map[string]chan struct{} // closed when the run finishes
}

func (h *harness) watchEnds() *endWatcher {
	h.t.Helper()
	w := &endWatcher{finished: map[string]bool{}, waiting: map[string]chan struct{}{}}
	sub, err := h.js.Conn().Subscribe("$KV."+natsx.BucketRuns+"."+testTenant+".*", func(m *nats.Msg) {
		rec := &baagentv1.Run{}
		if proto.Unmarshal(m.Data, rec) != nil || !isFinished(rec.GetState()) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if ch, ok := w.waiting[rec.GetRunId()]; ok {
			close(ch)
			delete(w.waiting, rec.GetRunId())
			return
		}
		w.finished[rec.GetRunId()] = true
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.js.Conn().Flush(); err != nil { // subscribed before any run starts
		h.t.Fatal(err)
	}
	w.sub = sub
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// waitForgotten waits until the run's finished record is stored and the
// replica has forgotten the run (its execution returned: the checkpoint
// deleted, nothing of it left in memory).
func (h *harness) waitForgotten(ctx context.Context, w *endWatcher, runID string) {
	h.t.Helper()
	w.mu.Lock()
	ch := make(chan struct{})
	if w.finished[runID] {
		delete(w.finished, runID)
		close(ch)
	} else {
		w.waiting[runID] = ch
	}
	w.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		h.t.Fatalf("run %s did not finish: %v", runID, ctx.Err())
	}
	// The record is stored by the executing goroutine before it forgets
	// the run.
	if r := h.srv.local(runID); r != nil {
		select {
		case <-r.done:
		case <-ctx.Done():
			h.t.Fatalf("run %s was not forgotten: %v", runID, ctx.Err())
		}
	}
}

// ---- scripted test model ----

// turnFunc returns the model's answer to its n-th call (from 0).
type turnFunc func(ctx context.Context, n int, req ModelRequest) (*ModelResponse, error)

type scriptedModel struct {
	turn turnFunc
	mu   sync.Mutex
	reqs []ModelRequest
}

func (m *scriptedModel) Stream(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error) {
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	resp, err := m.turn(ctx, n, req)
	if err != nil || resp == nil {
		return resp, err
	}
	if t := resp.Message.GetReasoningContent(); t != "" {
		onDelta(ModelDelta{Thought: t})
	}
	// Stream the content in two fragments, as an endpoint would.
	if c := resp.Message.GetContent(); c != "" {
		half := len(c) / 2
		for _, part := range []string{c[:half], c[half:]} {
			if part != "" {
				onDelta(ModelDelta{Text: part})
			}
		}
	}
	if resp.Usage == nil {
		resp.Usage = &baagentv1.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}
	}
	return resp, nil
}

func (m *scriptedModel) requests() []ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// answer is a final answer.
func answer(text string) *ModelResponse {
	return &ModelResponse{Message: &baagentv1.ChatMessage{Content: text}, FinishReason: "stop"}
}

// callTools is a response with tool calls: id, name, arguments triples.
func callTools(thought string, calls ...string) *ModelResponse {
	msg := &baagentv1.ChatMessage{Content: thought}
	for i := 0; i+2 < len(calls); i += 3 {
		msg.ToolCalls = append(msg.ToolCalls, &baagentv1.ToolCall{Id: calls[i], Name: calls[i+1], Arguments: calls[i+2]})
	}
	return &ModelResponse{Message: msg, FinishReason: "tool_calls"}
}

// lastToolResults returns the tool messages at the end of req's messages.
func lastToolResults(req ModelRequest) []*baagentv1.ChatMessage {
	var out []*baagentv1.ChatMessage
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].GetRole() != baagentv1.Role_ROLE_ASSISTANT; i-- {
		if req.Messages[i].GetRole() == baagentv1.Role_ROLE_TOOL {
			out = append([]*baagentv1.ChatMessage{req.Messages[i]}, out...)
		}
	}
	return out
}

func toolNames(req ModelRequest) []string {
	var out []string
	for _, s := range req.Tools {
		out = append(out, s.GetName())
	}
	return out
}

// ---- fake context service ----

type fakeContext struct {
	baagentv1.UnimplementedContextServiceServer
	mu   sync.Mutex
	conv map[string][]*baagentv1.ChatMessage
	// compressAbove marks windows of more history messages as compressed.
	compressAbove int
}

func newFakeContext() *fakeContext {
	return &fakeContext{conv: map[string][]*baagentv1.ChatMessage{}}
}

func (f *fakeContext) Append(_ context.Context, req *baagentv1.AppendRequest) (*baagentv1.AppendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := req.GetTenant() + "/" + req.GetConversationId()
	resp := &baagentv1.AppendResponse{}
	for _, m := range req.GetMessages() {
		if slices.ContainsFunc(f.conv[key], func(x *baagentv1.ChatMessage) bool { return x.GetId() == m.GetId() }) {
			resp.Duplicates++
			continue
		}
		f.conv[key] = append(f.conv[key], proto.Clone(m).(*baagentv1.ChatMessage))
		resp.Appended++
		resp.MessageIds = append(resp.MessageIds, m.GetId())
	}
	resp.MessageCount = int64(len(f.conv[key]))
	return resp, nil
}

func (f *fakeContext) BuildWindow(_ context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hist := f.conv[req.GetTenant()+"/"+req.GetConversationId()]
	resp := &baagentv1.BuildWindowResponse{ContextUsage: 0.1, Compression: &baagentv1.ContextCompressedPayload{
		CompressionStrategy: "none", OriginalMessageCount: int32(len(hist)), FinalMessageCount: int32(len(hist)),
	}}
	for _, m := range req.GetSystemMessages() {
		resp.Messages = append(resp.Messages, &baagentv1.WindowMessage{Message: m})
	}
	for _, m := range hist {
		resp.Messages = append(resp.Messages, &baagentv1.WindowMessage{Message: proto.Clone(m).(*baagentv1.ChatMessage)})
	}
	if f.compressAbove > 0 && len(hist) > f.compressAbove {
		resp.Compression.WasCompressed = true
		resp.Compression.CompressionStrategy = "truncate"
		resp.ContextUsage = 0.85
	}
	return resp, nil
}

func (f *fakeContext) history(conversationID string) []*baagentv1.ChatMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.conv[testTenant+"/"+conversationID])
}

// ---- fake toolrunner ----

type fakeToolRunner struct {
	baagentv1.UnimplementedToolRunnerServiceServer
	mu    sync.Mutex
	calls []*baagentv1.ToolInvocationRequest
	// block, when set, makes Invoke wait for the request's context.
	block chan struct{}
	// unimplementedInvoke makes Invoke answer Unimplemented.
	unimplementedInvoke bool
	// unavailable is how many of the next Invoke calls answer Unavailable,
	// as a toolrunner that dies mid-call does.
	unavailable int
}

func newFakeToolRunner() *fakeToolRunner { return &fakeToolRunner{} }

var fakeTools = []string{"file_read", "glob", "noop", "sql_query", "always_fails"}

// readOnlyFakeTools declare no side effects (as the real toolrunner's
// file_read, glob and sql_query do): they may run before the step's
// LLM_COMPLETE checkpoint is stored.
var readOnlyFakeTools = []string{"file_read", "glob", "noop", "sql_query"}

func (f *fakeToolRunner) ListTools(_ context.Context, req *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	resp := &baagentv1.ListToolsResponse{}
	for _, name := range fakeTools {
		if l := req.GetAllowedTools(); l != nil && !slices.ContainsFunc(l.GetNames(), func(p string) bool { ok, _ := path.Match(p, name); return ok }) {
			continue
		}
		resp.Tools = append(resp.Tools, &baagentv1.ToolDefinition{Schema: &baagentv1.ToolSchema{Name: name, Description: "test tool " + name}, Source: "builtin", ReadOnly: slices.Contains(readOnlyFakeTools, name)})
	}
	return resp, nil
}

func (f *fakeToolRunner) Invoke(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.GetRequest())
	block, unimpl, unavailable := f.block, f.unimplementedInvoke, f.unavailable > 0
	if unavailable {
		f.unavailable--
	}
	f.mu.Unlock()
	if unavailable {
		return nil, status.Error(codes.Unavailable, "error reading from server: EOF")
	}
	if unimpl {
		return f.UnimplementedToolRunnerServiceServer.Invoke(ctx, req)
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r := req.GetRequest()
	res := &baagentv1.ToolExecutionResult{ToolCallId: r.GetToolCallId(), Success: true, DurationMs: 1.5, OutputLevel: baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD}
	switch r.GetToolName() {
	case "sql_query":
		res.Observation = "Found 2 rows:\ncategory,revenue\nElectronics,125000\nFurniture,64000"
	case "always_fails":
		res.Success = false
		res.ErrorType = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR
		res.ErrorCode = "BOOM"
		res.ErrorMessage = "the tool failed on purpose"
		res.Observation = toolerror.Observation(r.GetToolCallId(), res.ErrorType, res.ErrorCode, res.ErrorMessage)
	default:
		res.Observation = fmt.Sprintf("%s ok: %v", r.GetToolName(), r.GetParameters().AsMap())
	}
	return &baagentv1.InvokeResponse{Result: res}, nil
}

func (f *fakeToolRunner) invocations() []*baagentv1.ToolInvocationRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// contains reports whether s contains every part.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
