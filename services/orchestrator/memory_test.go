package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/textcut"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory/capture"
)

// fakeMemory keeps episodes by idempotency key, as the memory service's
// AddEpisode does, and deletes a conversation's.
type fakeMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
	mu       sync.Mutex
	episodes map[string]*baagentv1.AddEpisodeRequest
	deletes  []string
}

func (f *fakeMemory) AddEpisode(_ context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.episodes == nil {
		f.episodes = map[string]*baagentv1.AddEpisodeRequest{}
	}
	if _, ok := f.episodes[req.GetIdempotencyKey()]; !ok {
		f.episodes[req.GetIdempotencyKey()] = req
	}
	return &baagentv1.AddEpisodeResponse{Episode: &baagentv1.Episode{Id: "ep_" + req.GetRunId()}}, nil
}

func (f *fakeMemory) DeleteConversationMemory(_ context.Context, req *baagentv1.DeleteConversationMemoryRequest) (*baagentv1.DeleteConversationMemoryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, req.GetTenant()+"/"+req.GetConversationId())
	var n int32
	for k, e := range f.episodes {
		if e.GetTenant() == req.GetTenant() && e.GetConversationId() == req.GetConversationId() {
			delete(f.episodes, k)
			n++
		}
	}
	return &baagentv1.DeleteConversationMemoryResponse{EpisodesRemoved: n}, nil
}

// of returns the episodes of a conversation.
func (f *fakeMemory) of(conv string) []*baagentv1.AddEpisodeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*baagentv1.AddEpisodeRequest
	for _, e := range f.episodes {
		if e.GetConversationId() == conv {
			out = append(out, e)
		}
	}
	return out
}

func (f *fakeMemory) client(t testing.TB) baagentv1.MemoryServiceClient {
	return baagentv1.NewMemoryServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMemoryServiceServer(gs, f) }))
}

// consumeCaptures runs the capture consumer (services/memory/capture)
// against mem until the returned function (also run at the test's end)
// stops it.
func consumeCaptures(t testing.TB, js jetstream.JetStream, mem baagentv1.MemoryServiceClient) func() {
	c, err := capture.New(capture.Options{JetStream: js, Memory: mem, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("capture consumer: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// memoryToolRunner is the fake toolrunner plus memory_search, which
// recalls one entity.
type memoryToolRunner struct{ *fakeToolRunner }

func (m memoryToolRunner) ListTools(ctx context.Context, req *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	resp, err := m.fakeToolRunner.ListTools(ctx, req)
	if err == nil {
		resp.Tools = append(resp.Tools, &baagentv1.ToolDefinition{Schema: &baagentv1.ToolSchema{Name: memorySearchTool, Description: "recall"}, Source: "builtin", ReadOnly: true})
	}
	return resp, err
}

func (m memoryToolRunner) Invoke(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	r := req.GetRequest()
	if r.GetToolName() != memorySearchTool {
		return m.fakeToolRunner.Invoke(ctx, req)
	}
	return &baagentv1.InvokeResponse{Result: &baagentv1.ToolExecutionResult{
		ToolCallId: r.GetToolCallId(), Success: true, DurationMs: 2,
		Observation: "Memory recall for \"Software\" (1, best first):\n1. Software [Category] — Licences.",
		MemoryHits: []*baagentv1.SearchHit{{
			Entity: &baagentv1.Entity{Id: "en_soft", Name: "Software", Type: "Category"}, Score: 0.032,
		}},
	}}, nil
}

// recallModel searches memory and queries, then answers; a user message
// with FAIL makes the model fail.
func recallModel(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	if userAsked(req, "FAIL") {
		return nil, errors.New("model endpoint exploded")
	}
	ids := toolResultIDs(req)
	if !slices.Contains(ids, "m1") {
		return callTools("Recall and query.", "m1", memorySearchTool, `{"query":"Software"}`, "q1", "sql_query", `{"query":"SELECT 1"}`), nil
	}
	return answer("Software sold best: 125000."), nil
}

func TestMemoryRecalledAndCapture(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakeMemory{}
	ft := newFakeToolRunner()
	h := newHarness(t, recallModel, harnessOptions{toolrunner: memoryToolRunner{ft}, mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "What sold best? Mail me at jane@example.com"})
	evs := h.events(ctx, run.GetRunId())
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	// memory_recalled follows memory_search's observe (the parallel
	// sql_query's events may come between them).
	var rec *baagentv1.MemoryRecalledPayload
	observed := false
	for _, ev := range evs {
		if ev.GetObserve().GetToolCallId() == "m1" {
			observed = true
		}
		if p := ev.GetMemoryRecalled(); p != nil {
			rec = p
			if !observed {
				t.Fatal("memory_recalled before memory_search's observe")
			}
		}
	}
	if rec == nil {
		t.Fatalf("no memory_recalled in %v", types(evs))
	}
	if rec.GetQuery() != "Software" || rec.GetOrigin() != "tool" || rec.GetToolCallId() != "m1" || len(rec.GetEntities()) != 1 {
		t.Fatalf("memory_recalled %v", rec)
	}
	if e := rec.GetEntities()[0]; e.GetEntityId() != "en_soft" || e.GetName() != "Software" || e.GetType() != "Category" || e.GetScore() != 0.032 {
		t.Fatalf("entity %v", e)
	}
	if n := strings.Count(strings.Join(types(evs), ","), "memory_recalled"); n != 1 {
		t.Fatalf("%d memory_recalled events", n)
	}

	// The capture request is queued, keyed by the run.
	msg := captured(ctx, t, h.js, done.GetConversationId())
	if msg.Header.Get(jetstream.MsgIDHeader) != done.GetRunId() {
		t.Fatalf("Nats-Msg-Id %q", msg.Header.Get(jetstream.MsgIDHeader))
	}
	req, err := capture.Decode(msg.Subject, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetTenant() != testTenant || req.GetRunId() != done.GetRunId() || req.GetIdempotencyKey() != done.GetRunId() ||
		req.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_RUN {
		t.Fatalf("capture request %v", req)
	}
	for _, want := range []string{"Question: What sold best?", "Answer: Software sold best: 125000.", "[sql_query] Found 2 rows"} {
		if !strings.Contains(req.GetContent(), want) {
			t.Errorf("episode lacks %q:\n%s", want, req.GetContent())
		}
	}
	if strings.Contains(req.GetContent(), "Memory recall") {
		t.Errorf("episode holds memory's own recall:\n%s", req.GetContent())
	}
	if got := testutil.ToFloat64(h.srv.metrics.memoryCaptures.WithLabelValues(captureQueued)); got != 1 {
		t.Fatalf("captures queued %v", got)
	}

	// A failed run is not captured.
	failed := h.start(ctx, &baagentv1.RunSpec{Input: "FAIL now"})
	if f := h.waitRun(ctx, failed.GetRunId()); f.GetState() != baagentv1.RunState_RUN_STATE_FAILED {
		t.Fatalf("run %v", f)
	}
	if n := captureCount(ctx, t, h.js, failed.GetConversationId()); n != 0 {
		t.Fatalf("%d capture requests for a failed run", n)
	}
}

// Without a memory service nothing is queued.
func TestNoCaptureWithoutMemory(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, recallModel, harnessOptions{toolrunner: memoryToolRunner{newFakeToolRunner()}})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "What sold best?"})
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	if n := captureCount(ctx, t, h.js, done.GetConversationId()); n != 0 {
		t.Fatalf("%d capture requests without a memory service", n)
	}
}

// captured reads the one capture request queued for conv.
func captured(ctx context.Context, t *testing.T, js jetstream.JetStream, conv string) *jetstream.RawStreamMsg {
	t.Helper()
	msgs := captureMsgs(ctx, t, js, conv, natsx.CaptureKindEpisode)
	if len(msgs) != 1 {
		t.Fatalf("%d capture requests for %s, want 1", len(msgs), conv)
	}
	return msgs[0]
}

// captureCount counts the episode capture requests queued for conv (the
// runs' interaction traces travel on the same queue).
func captureCount(ctx context.Context, t *testing.T, js jetstream.JetStream, conv string) uint64 {
	t.Helper()
	return uint64(len(captureMsgs(ctx, t, js, conv, natsx.CaptureKindEpisode)))
}

// captureMsgs reads the capture requests of kind queued for conv (a work
// queue: by sequence).
func captureMsgs(ctx context.Context, t *testing.T, js jetstream.JetStream, conv, kind string) []*jetstream.RawStreamMsg {
	t.Helper()
	subj, err := natsx.MemoryCaptureSubject(testTenant, conv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, natsx.StreamMemoryCapture)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		k := msg.Header.Get(natsx.CaptureKindHeader)
		if k == "" {
			k = natsx.CaptureKindEpisode
		}
		if msg.Subject == subj && k == kind {
			out = append(out, msg)
		}
	}
	return out
}

func TestEpisodeContentBounds(t *testing.T) {
	var n episodeNotes
	big := strings.Repeat("é", 3000)
	for i := range 20 {
		n.note(&baagentv1.ObservePayload{ToolName: "sql_query", Observation: big, Success: i%2 == 0})
	}
	n.note(&baagentv1.ObservePayload{ToolName: memorySearchTool, Observation: "recall", Success: true})
	n.note(&baagentv1.ObservePayload{ToolName: "glob", Observation: "inner", Success: true, ParentToolCallId: "c1"})
	obs := n.snapshot()
	total := 0
	for _, o := range obs {
		if !strings.HasPrefix(o, "[sql_query] ") || len(o) > len("[sql_query] ")+episodeObservationBytes {
			t.Fatalf("observation %q…", o[:40])
		}
		total += len(o) - len("[sql_query] ")
	}
	if total > episodeObservationsMax || len(obs) < episodeObservationsMax/episodeObservationBytes {
		t.Fatalf("%d observations, %d bytes", len(obs), total)
	}
	c := EpisodeContent(strings.Repeat("q", 100_000), strings.Repeat("a", 100_000), obs)
	if len(c) > capture.MaxContentBytes || !utf8.ValidString(c) {
		t.Fatalf("content of %d bytes", len(c))
	}
	// Many tiny results with long tool names stay within the bounds too.
	var tiny episodeNotes
	for range 10_000 {
		tiny.note(&baagentv1.ObservePayload{ToolName: "mcp__" + strings.Repeat("x", 59), Observation: "1", Success: true})
	}
	lines := tiny.snapshot()
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	if len(lines) > episodeObservationsN || size > episodeObservationsMax {
		t.Fatalf("%d notes of %d bytes", len(lines), size)
	}
	if c := EpisodeContent(strings.Repeat("é", 50_000), strings.Repeat("a", 100_000), lines); len(c) > capture.MaxContentBytes {
		t.Fatalf("content of %d bytes", len(c))
	}
}

func FuzzEpisodeContent(f *testing.F) {
	f.Add("What sold best?", "Software.", "[sql_query] rows", 10)
	f.Add("", "", "", 0)
	f.Add("\xff\xfe", "é", strings.Repeat("x", 2000), 2)
	f.Fuzz(func(t *testing.T, q, a, o string, n int) {
		var notes episodeNotes
		for range min(max(n, 0), 200) {
			notes.note(&baagentv1.ObservePayload{ToolName: "t", Observation: o, Success: true})
		}
		c := EpisodeContent(q, a, notes.snapshot())
		if !utf8.ValidString(c) || len(c) > capture.MaxContentBytes || !strings.HasPrefix(c, "Question: ") {
			t.Fatalf("content of %d bytes, valid %v", len(c), utf8.ValidString(c))
		}
		for _, s := range []string{q, a} {
			if cut := textcut.Mark(s, 10); len(cut) > 10 {
				t.Fatalf("cutUTF8 gave %d bytes", len(cut))
			}
		}
	})
}

// BenchmarkEpisodeContent is the cost a completed run adds for its
// episode: noting 20 tool results and building the text.
func BenchmarkEpisodeContent(b *testing.B) {
	obs := &baagentv1.ObservePayload{ToolName: "sql_query", Success: true, Observation: strings.Repeat("Software,6181060.20,512\n", 200)}
	b.ReportAllocs()
	for b.Loop() {
		var n episodeNotes
		for range 20 {
			n.note(obs)
		}
		_ = EpisodeContent("Which product category had the highest revenue last quarter?", strings.Repeat("answer ", 200), n.snapshot())
	}
}

// A memory service without the API (Unimplemented) holds nothing to
// delete: the conversation's deletion goes on, its queued captures purged.
func TestDeleteConversationMemoryUnimplemented(t *testing.T) {
	ctx := testCtx(t)
	none := baagentv1.NewMemoryServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) {
		baagentv1.RegisterMemoryServiceServer(gs, baagentv1.UnimplementedMemoryServiceServer{})
	}))
	done := func(context.Context, int, ModelRequest) (*ModelResponse, error) { return answer("Done."), nil }
	h := newHarness(t, done, harnessOptions{real: realPeersIn(&dataDirs{}), mutate: func(o *Options) { o.Memory = none }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "What sold best?"})
	ended := h.waitRun(ctx, run.GetRunId())
	if n := captureCount(ctx, t, h.js, ended.GetConversationId()); n != 1 {
		t.Fatalf("%d capture requests queued, want 1", n)
	}
	if _, err := h.client.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: testTenant, ConversationId: ended.GetConversationId()}); err != nil {
		t.Fatal(err)
	}
	if n := captureCount(ctx, t, h.js, ended.GetConversationId()); n != 0 {
		t.Fatalf("%d capture requests left after the deletion", n)
	}
}

// A run that pauses for the user's answer (its execution ends, and a new
// one resumes it from the checkpoint) keeps the observations noted before
// the pause for its episode.
func TestCaptureKeepsNotesAcrossAPause(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakeMemory{}
	model := func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		ids := toolResultIDs(req)
		switch {
		case !slices.Contains(ids, "q1"):
			return callTools("Query first.", "q1", "sql_query", `{"query":"SELECT 1"}`), nil
		case !slices.Contains(ids, "call_ask"):
			return callTools("Ask the scope.", "call_ask", AskClarificationTool, clarifyArgs), nil
		}
		return answer("Electronics led."), nil
	}
	h := newHarness(t, model, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "compare revenue"})
	waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	testkit.Eventually(t, 10*time.Second, "the waiting run released by its replica", func() bool { return h.srv.local(run.GetRunId()) == nil })
	q := waiting.GetPendingInput().GetClarification()
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: q.GetQuestionId(), Answer: "Only Q4"}); err != nil {
		t.Fatal(err)
	}
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	msg := captured(ctx, t, h.js, done.GetConversationId())
	req, err := capture.Decode(msg.Subject, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(req.GetContent(), "[sql_query] Found 2 rows") || !strings.Contains(req.GetContent(), "Answer: Electronics led.") {
		t.Fatalf("episode after a pause:\n%s", req.GetContent())
	}
}

func TestEpisodeNotesRestoreBounds(t *testing.T) {
	var n episodeNotes
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = "[t] " + strings.Repeat("x", 500) + "\xff"
	}
	n.restore(lines)
	got := n.snapshot()
	size := 0
	for _, l := range got {
		size += len(l)
		if !utf8.ValidString(l) {
			t.Fatalf("invalid UTF-8 kept: %q", l)
		}
	}
	if len(got) == 0 || len(got) > episodeObservationsN || size > episodeObservationsMax+len(got)*2 {
		t.Fatalf("%d notes of %d bytes restored", len(got), size)
	}
	n.restore(nil)
	if len(n.snapshot()) != 0 {
		t.Fatal("restore(nil) kept notes")
	}
}
