package memory

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

// TestRetriesThenSyncs checks that retryable extraction failures are
// retried within a claim and the episode ends synced.
func TestRetriesThenSyncs(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	x := funcExtractor(func(_ context.Context, content string) (*extract.Result, error) {
		if calls.Add(1) <= 2 {
			return nil, retryableErr(true)
		}
		return &extract.Result{Entities: []extract.Entity{ent("Acme Labs", "Customer", "")}}, nil
	})
	ts := newTestServer(t, Options{Extractor: x}, true)
	ep := ts.add(t, "t", "Acme Labs")
	if len(ep.GetEntityIds()) != 1 || calls.Load() != 3 {
		t.Fatalf("episode %v after %d calls", ep, calls.Load())
	}
	if v := counterValue(t, ts.reg, "baagent_memory_episodes_total", "outcome", outcomeRetried); v != 2 {
		t.Errorf("retried metric = %v, want 2", v)
	}
}

// TestFailures checks the episodes that end FAILED: a permanent error at
// once, retryable ones after MaxAttempts, and every episode when no
// extraction model is configured. Wait answers with the failed episode.
func TestFailures(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	x := funcExtractor(func(_ context.Context, content string) (*extract.Result, error) {
		calls.Add(1)
		if content == "permanent" {
			return nil, errPermanent
		}
		return nil, retryableErr(true)
	})
	ts := newTestServer(t, Options{Extractor: x, MaxAttempts: 2}, true)
	ctx := t.Context()
	for _, tc := range []struct {
		content string
		calls   int32
	}{{"permanent", 1}, {"flaky", 2}} {
		before := calls.Load()
		resp, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "t", Content: tc.content, Wait: true})
		if err != nil {
			t.Fatal(err)
		}
		ep := resp.GetEpisode()
		if ep.GetStatus() != baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED || !strings.Contains(ep.GetError(), "model said no") {
			t.Fatalf("%s: episode = %v", tc.content, ep)
		}
		if n := calls.Load() - before; n != tc.calls {
			t.Errorf("%s: %d extraction calls, want %d", tc.content, n, tc.calls)
		}
	}

	none := newTestServer(t, Options{}, true)
	resp, err := none.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "t", Content: "anything", Wait: true})
	if err != nil || resp.GetEpisode().GetStatus() != baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED || resp.GetEpisode().GetError() != noExtractorMessage {
		t.Fatalf("without a model: %v, %v", resp, err)
	}
	st, _ := none.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "t"})
	if st.GetEpisodesFailed() != 1 {
		t.Fatalf("stats = %v", st)
	}
}

// TestLeaseExpiryAnotherReplicaFinishes plays a replica that claimed an
// episode and died: once its lease runs out a running replica claims the
// episode and syncs it, and the dead replica's late write is refused.
func TestLeaseExpiryAnotherReplicaFinishes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := t.Context()
	ep, _, err := st.CreateEpisode(ctx, &store.Episode{ID: newID(episodePrefix, time.Now()), Tenant: "t", Source: store.SourceUser,
		Content: acmeText, CreatedAt: time.Now(), Status: store.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.ClaimEpisodes(ctx, "dead-replica", 10, 300*time.Millisecond)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	ts := newTestServer(t, Options{Store: st, Extractor: sampleExtractor(), ReplicaID: "live-replica"}, true)
	done := waitStatus(t, st, "t", ep.ID, store.StatusSynced)
	if done.Attempts != 2 || len(done.EntityIDs) != 4 {
		t.Fatalf("episode = %+v, want synced on its second claim", done)
	}
	if _, err := st.CompleteEpisode(ctx, "t", ep.ID, "dead-replica", store.IngestResult{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the dead replica's write = %v, want ErrConflict", err)
	}
	_ = ts
}

// TestStuckExtractionGivesTheEpisodeBack checks that a replica whose
// extraction outlasts its lease gives the episode back before the lease
// runs out, and that a later claim finishes it.
func TestStuckExtractionGivesTheEpisodeBack(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	good := sampleExtractor()
	x := funcExtractor(func(ctx context.Context, content string) (*extract.Result, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // stuck until the lease is nearly spent
			return nil, ctx.Err()
		}
		return good.Extract(ctx, content)
	})
	ts := newTestServer(t, Options{Extractor: x, Lease: 2 * time.Second, ExtractTimeout: time.Minute}, true)
	resp, err := ts.c.AddEpisode(t.Context(), &baagentv1.AddEpisodeRequest{Tenant: "t", Content: acmeText})
	if err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, ts.store, "t", resp.GetEpisode().GetId(), store.StatusSynced)
	if done.Attempts != 2 || len(done.EntityIDs) != 4 {
		t.Fatalf("episode = %+v, want synced on the second claim", done)
	}
	if v := counterValue(t, ts.reg, "baagent_memory_episodes_total", "outcome", outcomeReleased); v != 1 {
		t.Errorf("released metric = %v, want 1", v)
	}
}

// TestShutdownReleasesLeases checks that stopping Run gives back the
// episodes in progress at once, so another replica need not wait for the
// lease, and that Run returns nil.
func TestShutdownReleasesLeases(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	entered := make(chan struct{}, 1)
	stuck := funcExtractor(func(ctx context.Context, _ string) (*extract.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ts := newTestServer(t, Options{Store: st, Extractor: stuck, Lease: time.Hour}, false)
	runCtx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- ts.srv.Run(runCtx) }()
	resp, err := ts.c.AddEpisode(t.Context(), &baagentv1.AddEpisodeRequest{Tenant: "t", Content: acmeText})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v", err)
	}
	ep, err := st.GetEpisode(t.Context(), "t", resp.GetEpisode().GetId())
	if err != nil || ep.Status != store.StatusPending || ep.Attempts != 1 {
		t.Fatalf("after shutdown: %+v, %v; want pending after one attempt", ep, err)
	}
	// With the lease released, another replica claims it at once.
	claimed, err := st.ClaimEpisodes(t.Context(), "next", 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim after shutdown = %v, %v", claimed, err)
	}
}

// TestCrashLoopingEpisodeFails checks that an episode claimed more than
// MaxClaims times is failed rather than retried forever.
func TestCrashLoopingEpisodeFails(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := t.Context()
	ep, _, err := st.CreateEpisode(ctx, &store.Episode{ID: newID(episodePrefix, time.Now()), Tenant: "t", Source: store.SourceUser,
		Content: "x", CreatedAt: time.Now(), Status: store.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := st.ClaimEpisodes(ctx, "crashing", 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := st.FailEpisode(ctx, "t", ep.ID, "crashing", "replica died", false); err != nil {
			t.Fatal(err)
		}
	}
	newTestServer(t, Options{Store: st, Extractor: sampleExtractor(), MaxClaims: 2}, true)
	done := waitStatus(t, st, "t", ep.ID, store.StatusFailed)
	if !strings.Contains(done.Error, "gave up after 2 attempts") {
		t.Fatalf("error = %q", done.Error)
	}
}
