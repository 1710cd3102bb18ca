package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openTest opens a store on a fresh database, closed when the test ends.
func openTest(t testing.TB) (*Store, string) {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	return openDSN(t, dsn), dsn
}

func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var epSeq struct {
	sync.Mutex
	n int
}

// addEpisode creates a pending episode for tenant.
func addEpisode(t testing.TB, s *Store, tenant, conv string) *store.Episode {
	t.Helper()
	epSeq.Lock()
	epSeq.n++
	n := epSeq.n
	epSeq.Unlock()
	ep, created, err := s.CreateEpisode(testCtx(t), &store.Episode{
		ID: fmt.Sprintf("ep_%026d", n), Tenant: tenant, Source: store.SourceUser,
		Content: fmt.Sprintf("episode %d", n), ConversationID: conv,
		CreatedAt: time.Now().Add(time.Duration(n) * time.Millisecond), Status: store.StatusPending,
	})
	if err != nil || !created {
		t.Fatalf("create episode: %v %v", created, err)
	}
	return ep
}

// ingest claims the tenant's episode ep and completes it with r.
func ingest(t testing.TB, s *Store, ep *store.Episode, r store.IngestResult) store.IngestOutcome {
	t.Helper()
	ctx := testCtx(t)
	for {
		got, err := s.ClaimEpisodes(ctx, "w1", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
	}
	out, err := s.CompleteEpisode(ctx, ep.Tenant, ep.ID, "w1", r)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	return out
}

func unit(v ...float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}

func TestEpisodeLifecycle(t *testing.T) {
	s, _ := openTest(t)
	ctx := testCtx(t)
	if s.Backend() != "postgres" {
		t.Fatalf("backend %q", s.Backend())
	}
	ep := &store.Episode{ID: "ep_1", Tenant: "acme", Source: store.SourceRun, Content: "hello",
		IdempotencyKey: "k1", CreatedAt: time.Now(), Status: store.StatusPending, ConversationID: "c1"}
	got, created, err := s.CreateEpisode(ctx, ep)
	if err != nil || !created || got.ID != "ep_1" {
		t.Fatalf("create: %v %v %+v", created, err, got)
	}
	dup := *ep
	dup.ID = "ep_2"
	got, created, err = s.CreateEpisode(ctx, &dup)
	if err != nil || created || got.ID != "ep_1" {
		t.Fatalf("idempotent create: %v %v %+v", created, err, got)
	}
	if _, err := s.GetEpisode(ctx, "acme", "ep_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second episode stored: %v", err)
	}
	claimed, err := s.ClaimEpisodes(ctx, "w1", 10, time.Minute)
	if err != nil || len(claimed) != 1 || claimed[0].Status != store.StatusProcessing || claimed[0].Attempts != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	if again, _ := s.ClaimEpisodes(ctx, "w2", 10, time.Minute); len(again) != 0 {
		t.Fatalf("leased episode claimed again: %+v", again)
	}
	if _, err := s.CompleteEpisode(ctx, "acme", "ep_1", "w2", store.IngestResult{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("complete by a non-owner: %v", err)
	}
	if err := s.FailEpisode(ctx, "acme", "ep_1", "w1", "model down", false); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetEpisode(ctx, "acme", "ep_1")
	if got.Status != store.StatusPending || got.Error != "model down" {
		t.Fatalf("after retryable failure: %+v", got)
	}
	claimed, _ = s.ClaimEpisodes(ctx, "w2", 10, time.Minute)
	if len(claimed) != 1 || claimed[0].Attempts != 2 {
		t.Fatalf("reclaim: %+v", claimed)
	}
	out, err := s.CompleteEpisode(ctx, "acme", "ep_1", "w2", store.IngestResult{
		Entities: []store.ExtractedEntity{
			{Name: "Alice", Type: "person", Summary: "CTO of Acme", Embedding: unit(1, 0, 0)},
			{Name: "Acme", Type: "org", Attributes: map[string]string{"hq": "Berlin"}, Embedding: unit(0, 1, 0)},
		},
		Relations: []store.ExtractedRelation{{Source: 0, Target: 1, Type: "works_at", Fact: "Alice works at Acme", Confidence: 0.8}},
	})
	if err != nil || len(out.EntityIDs) != 2 || len(out.CreatedIDs) != 2 || len(out.RelationIDs) != 1 {
		t.Fatalf("complete: %v %+v", err, out)
	}
	got, _ = s.GetEpisode(ctx, "acme", "ep_1")
	if got.Status != store.StatusSynced || got.ProcessedAt.IsZero() || !slices.Equal(got.EntityIDs, out.EntityIDs) {
		t.Fatalf("synced episode: %+v", got)
	}
	alice, err := s.FindEntity(ctx, "acme", "ALICE", "")
	if err != nil || alice.ID != out.EntityIDs[0] || alice.MentionCount != 1 || !strings.HasPrefix(alice.ID, "en_") || len(alice.ID) != 29 {
		t.Fatalf("find: %v %+v", err, alice)
	}
	st, err := s.Stats(ctx, "acme")
	if err != nil || st.Episodes != 1 || st.Entities != 2 || st.Relations != 1 || st.EpisodesPending != 0 {
		t.Fatalf("stats: %v %+v", err, st)
	}
	// A second episode merges into Alice under another name.
	ep3 := addEpisode(t, s, "acme", "c2")
	out2 := ingest(t, s, ep3, store.IngestResult{
		Entities: []store.ExtractedEntity{
			{MergeInto: alice.ID, Name: "Alice Smith", Type: "person", Attributes: map[string]string{"role": "CTO"}},
			{Name: "acme", Type: "org"},
		},
		Relations: []store.ExtractedRelation{{Source: 0, Target: 1, Type: "works_at", Confidence: 0.5}},
	})
	if len(out2.CreatedIDs) != 0 || !slices.Equal(out2.EntityIDs, out.EntityIDs) || !slices.Contains(out2.ChangedSummary, alice.ID) {
		t.Fatalf("merge outcome: %+v", out2)
	}
	if a, err := s.FindEntity(ctx, "acme", "alice smith", "person"); err != nil || a.ID != alice.ID || a.MentionCount != 2 || a.Attributes["role"] != "CTO" {
		t.Fatalf("alias: %v %+v", err, a)
	}
	rels, err := s.Relations(ctx, "acme", []string{alice.ID}, 10)
	if err != nil || len(rels) != 1 || rels[0].EpisodeCount != 2 || math.Abs(rels[0].Weight-0.9) > 1e-9 || rels[0].Fact != "Alice works at Acme" {
		t.Fatalf("relations: %v %+v", err, rels)
	}
	// Deleting the first episode keeps what the second supports.
	del, err := s.DeleteEpisode(ctx, "acme", "ep_1")
	if err != nil || del.Episodes != 1 || del.Entities != 0 || del.Relations != 0 {
		t.Fatalf("delete first: %v %+v", err, del)
	}
	del, err = s.DeleteConversation(ctx, "acme", "c2")
	if err != nil || del.Episodes != 1 || del.Entities != 2 || del.Relations != 1 {
		t.Fatalf("delete conversation: %v %+v", err, del)
	}
	if _, err := s.GetEntity(ctx, "acme", alice.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("orphan entity kept: %v", err)
	}
}
