package orchestrator

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/scripted/scriptedtest"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/pgtest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	contextsvc "github.com/baagent/baagent/services/context"
	"github.com/baagent/baagent/services/memory"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store/postgres"
	"github.com/baagent/baagent/services/toolrunner"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
)

// flakyMemory is the real memory service behind a switch: while down,
// AddEpisode answers Unavailable, as a memory service that is restarting
// does.
type flakyMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
	real baagentv1.MemoryServiceClient
	down atomic.Bool
}

func (f *flakyMemory) AddEpisode(ctx context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	if f.down.Load() {
		return nil, status.Error(codes.Unavailable, "memory service restarting")
	}
	return f.real.AddEpisode(ctx, req)
}

// memorySuite is the orchestrator with the real memory service
// (PostgreSQL store, lexical embeddings, extraction by the scripted
// model's gazetteer), the real context and toolrunner services (whose
// memory tools call it), the scripted model answering the runs, and the
// capture consumer.
type memorySuite struct {
	*harness
	mem   baagentv1.MemoryServiceClient
	flaky *flakyMemory
}

func newMemorySuite(t *testing.T) *memorySuite {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	discard := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sm, err := scripted.New(scripted.Options{Dir: filepath.Join("..", "..", "examples", "scenarios"), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	model, base := scriptedtest.Serve(t, sm)
	ex, err := extract.NewOpenAI(extract.Config{BaseURL: base, Model: scripted.ModelName})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := memory.New(memory.Options{
		Store: st, Embedder: embed.NewLexical(0), Extractor: ex, Logger: discard,
		PollInterval: 100 * time.Millisecond, CommunityInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, ctx, ms.Run)
	mem := baagentv1.NewMemoryServiceClient(vt.Serve(t, ms.Register))
	flaky := &flakyMemory{real: mem}
	flakyClient := baagentv1.NewMemoryServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMemoryServiceServer(gs, flaky) }))

	dirs := &dataDirs{}
	h := newHarness(t, nil, harnessOptions{
		real: func(t testing.TB, js jetstream.JetStream, tokens baagentv1.TokensServiceClient) (baagentv1.ContextServiceServer, baagentv1.ToolRunnerServiceServer) {
			cs := contextsvc.New(contextsvc.Options{Logger: discard, JetStream: js, Tokens: tokens})
			dir := t.TempDir()
			dirs.workspaces, dirs.artifacts = filepath.Join(dir, "workspaces"), filepath.Join(dir, "artifacts")
			records, err := idempotency.OpenKV(ctx, js)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := toolrunner.New(toolrunner.Options{
				Logger: discard, WorkspaceDir: dirs.workspaces, WorkspaceSeedDir: filepath.Join("..", "..", "examples", "data"),
				ArtifactDir: dirs.artifacts, Records: records, Memory: mem,
			})
			if err != nil {
				t.Fatal(err)
			}
			testkit.Run(t, ctx, cs.Run)
			testkit.Run(t, ctx, tr.Run)
			return cs, tr
		},
		mutate: func(o *Options) {
			o.Model = LLM(model)
			o.DefaultModel = scripted.ModelName
			o.Memory = mem
		},
	})
	consumeCaptures(t, h.js, flakyClient)
	return &memorySuite{harness: h, mem: mem, flaky: flaky}
}

// episodes lists a conversation's episodes.
func (s *memorySuite) episodes(ctx context.Context, conv string) []*baagentv1.Episode {
	s.t.Helper()
	resp, err := s.mem.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: testTenant, ConversationId: conv})
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.GetEpisodes()
}

// synced waits until conv has exactly one episode, processed, and
// returns it.
func (s *memorySuite) synced(ctx context.Context, conv string) *baagentv1.Episode {
	s.t.Helper()
	var ep *baagentv1.Episode
	testkit.EventuallyContext(ctx, s.t, "the run's episode is processed", func() (bool, string) {
		eps := s.episodes(ctx, conv)
		if len(eps) == 1 && eps[0].GetStatus() == baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED {
			ep = eps[0]
			return true, ""
		}
		if len(eps) == 1 && eps[0].GetStatus() == baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED {
			s.t.Fatalf("episode failed: %s", eps[0].GetError())
		}
		return false, strings.TrimSpace(strings.Repeat("episode ", len(eps)))
	})
	return ep
}

func (s *memorySuite) ask(ctx context.Context, conv, question string) (*baagentv1.Run, []*baagentv1.Event) {
	s.t.Helper()
	run := s.start(ctx, &baagentv1.RunSpec{Input: question, ConversationId: conv})
	evs := s.events(ctx, run.GetRunId())
	done := s.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		s.t.Fatalf("run %q: %v", question, done)
	}
	return done, evs
}

// TestMemoryEndToEnd: a completed run becomes an episode; its entities
// (the scripted extraction) are searchable; a second run's memory_search
// recalls them and its events carry memory_recalled. Personal data in the
// question is not stored.
func TestMemoryEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	s := newMemorySuite(t)

	first, _ := s.ask(ctx, "", "Which product category had the highest revenue last quarter? Mail it to jane.doe@example.com, card 4111 1111 1111 1111.")
	ep := s.synced(ctx, first.GetConversationId())
	if ep.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_RUN || ep.GetRunId() != first.GetRunId() || len(ep.GetEntityIds()) == 0 {
		t.Fatalf("episode %v", ep)
	}
	for _, pii := range []string{"jane.doe@example.com", "4111 1111 1111 1111", "4111111111111111"} {
		if strings.Contains(ep.GetContent(), pii) {
			t.Errorf("the stored episode holds %q:\n%s", pii, ep.GetContent())
		}
	}
	if ep.GetRedactions() < 2 || !strings.Contains(ep.GetContent(), "Answer: ") || !strings.Contains(ep.GetContent(), "[sql_query]") {
		t.Errorf("episode (%d redactions):\n%s", ep.GetRedactions(), ep.GetContent())
	}

	found, err := s.mem.Search(ctx, &baagentv1.SearchRequest{Tenant: testTenant, Query: "Software category"})
	if err != nil {
		t.Fatal(err)
	}
	var software string
	for _, h := range found.GetHits() {
		if h.GetEntity().GetName() == "Software" {
			software = h.GetEntity().GetId()
		}
	}
	if software == "" {
		t.Fatalf("search after the first run does not find Software: %v", found.GetHits())
	}

	second, evs := s.ask(ctx, "", "What do we know about the Software category?")
	var rec *baagentv1.MemoryRecalledPayload
	var obs string
	for _, ev := range evs {
		if p := ev.GetMemoryRecalled(); p != nil {
			rec = p
		}
		if o := ev.GetObserve(); o.GetToolName() == memorySearchTool {
			obs = o.GetObservation()
		}
	}
	if rec == nil || rec.GetOrigin() != "tool" || rec.GetQuery() != "Software category" || len(rec.GetEntities()) == 0 {
		t.Fatalf("memory_recalled %v (events %v)", rec, types(evs))
	}
	recalledSoftware := false
	for _, e := range rec.GetEntities() {
		recalledSoftware = recalledSoftware || e.GetName() == "Software" && e.GetEntityId() == software && e.GetType() == "ProductCategory"
	}
	if !recalledSoftware {
		t.Fatalf("recalled %v, want Software (%s) among them", rec.GetEntities(), software)
	}
	if !strings.Contains(obs, "Software [ProductCategory]") {
		t.Fatalf("memory_search observation:\n%s", obs)
	}
	if !strings.Contains(second.GetFinalAnswer(), "Software [ProductCategory]") {
		t.Fatalf("answer does not quote memory:\n%s", second.GetFinalAnswer())
	}
	// The second run is an episode too (its answer quotes the recall);
	// memory_search's result is not among its observations.
	ep2 := s.synced(ctx, second.GetConversationId())
	if strings.Contains(ep2.GetContent(), "[memory_search]") {
		t.Fatalf("episode of the recall run holds the recall as an observation:\n%s", ep2.GetContent())
	}
}

// TestMemoryCaptureSwitchAndOutage: a conversation whose capture is off
// leaves no episode; a run completed while the memory service is down is
// remembered once it is back, once.
func TestMemoryCaptureSwitchAndOutage(t *testing.T) {
	ctx := testCtx(t)
	s := newMemorySuite(t)
	q := "Which product category had the highest revenue last quarter?"

	// Capture off for one conversation.
	off, _ := s.ask(ctx, "", q)
	s.synced(ctx, off.GetConversationId())
	if _, err := s.mem.UpdateMemorySettings(ctx, &baagentv1.UpdateMemorySettingsRequest{
		Tenant: testTenant, ConversationId: off.GetConversationId(), ConversationCapture: proto.Bool(false),
	}); err != nil {
		t.Fatal(err)
	}
	again, _ := s.ask(ctx, off.GetConversationId(), q)
	testkit.EventuallyContext(ctx, t, "the capture request is consumed", func() (bool, string) {
		n := captureCount(ctx, t, s.js, off.GetConversationId())
		return n == 0, "queued"
	})
	// Still only the episode of the run before the switch.
	eps := s.episodes(ctx, off.GetConversationId())
	if len(eps) != 1 || eps[0].GetRunId() == again.GetRunId() {
		t.Fatalf("episodes of the conversation without capture: %v", eps)
	}

	// An outage during capture.
	s.flaky.down.Store(true)
	down, _ := s.ask(ctx, "", q)
	testkit.EventuallyContext(ctx, t, "the capture is retried while memory is down", func() (bool, string) {
		return consumerRedelivered(ctx, t, s.js) > 0, "not redelivered yet"
	})
	if eps := s.episodes(ctx, down.GetConversationId()); len(eps) != 0 {
		t.Fatalf("episodes while memory was down: %v", eps)
	}
	s.flaky.down.Store(false)
	ep := s.synced(ctx, down.GetConversationId())
	if ep.GetRunId() != down.GetRunId() {
		t.Fatalf("episode %v", ep)
	}
	testkit.EventuallyContext(ctx, t, "the capture queue is empty", func() (bool, string) {
		return captureCount(ctx, t, s.js, down.GetConversationId()) == 0, "queued"
	})
	if eps := s.episodes(ctx, down.GetConversationId()); len(eps) != 1 {
		t.Fatalf("%d episodes after the outage, want 1", len(eps))
	}
}

// consumerRedelivered is how many capture messages the consumer delivered
// more than once.
func consumerRedelivered(ctx context.Context, t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	cons, err := js.Consumer(ctx, natsx.StreamMemoryCapture, "memory-capture")
	if err != nil {
		return 0
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.NumRedelivered
}
