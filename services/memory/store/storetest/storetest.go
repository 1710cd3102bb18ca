// Package storetest is the conformance suite of store.Store: every
// implementation runs Run against a fresh store and must pass all of it.
// The suite pins down the behaviour the interface's doc comments leave to
// judgement, so that the SQLite and PostgreSQL stores answer alike:
//
//   - A relation (source, target, type) supported by several episodes has
//     EpisodeCount = the number of distinct supporting episodes and Weight =
//     1 - Π(1 - confidence_e) over them (noisy-or, so it stays in (0, 1] and
//     rises with support); an episode supporting it twice counts its highest
//     confidence once. Removing a supporting episode recomputes both.
//   - Self-loops (both ends resolving to one entity) are skipped.
//   - An entity's MentionCount is the number of distinct episodes with a
//     MENTIONS edge to it. DeleteEpisode removes the entities no remaining
//     episode mentions and the relations no remaining episode supports (and
//     every relation of a removed entity).
//   - FindEntity and NamePrefix compare Unicode-lower-cased strings;
//     ListEntities is ordered by lower-cased name, then id.
//   - ListEpisodes is ordered by CreatedAt then ID, both descending.
//   - KeywordSearch matches any of the query's words (OR), ranked so that
//     an entity matching more of them ranks higher; scores are positive,
//     best first. Any text is a valid query: operators and punctuation are
//     words or separators, never syntax; a query without words finds
//     nothing.
//   - Traverse: a hit's Weight is the best product of edge weights over the
//     paths of at most depth hops and Hops is the length of that path (the
//     shorter on ties); order is Weight desc, Hops asc, ID asc.
//   - Neighbourhood: breadth first from the centre, strongest edges first;
//     Truncated when an entity within depth was left out for maxNodes.
//     Relations are those among the returned entities; Communities those
//     the returned entities belong to. An unknown centre is ErrNotFound.
//   - ReplaceCommunities ignores member ids that are not the tenant's
//     entities; MemberCount counts the members set.
//   - GetCommunities with no ids returns all of the tenant's communities.
//   - TenantsChangedSince reports changes by CompleteEpisode and the
//     deletes, not by community writes (the updater's own writes).
//   - Stats.EpisodesPending counts pending and processing episodes.
//   - Page.Size outside 1..500 is clamped (0 means 50); a malformed page
//     token is an error.
//   - DeleteConversation of a conversation with no episodes deletes
//     nothing and is not an error.
//
// open must return a store that is empty, or at least holds no pending
// episodes of other tests (ClaimEpisodes takes any tenant's); the suite
// uses fresh tenant names in every subtest.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/store"
)

// Dims is the embedding length the suite uses.
const Dims = 8

var seq atomic.Int64

// uniq returns a name unique within the process.
func uniq(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Run runs the suite; open returns a fresh store for one subtest (closed by
// the suite).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"EpisodeCreateGet", testEpisodeCreateGet},
		{"EpisodeIdempotency", testEpisodeIdempotency},
		{"ListEpisodes", testListEpisodes},
		{"ClaimCompleteFail", testClaimCompleteFail},
		{"LeaseExpiry", testLeaseExpiry},
		{"ConcurrentClaimers", testConcurrentClaimers},
		{"CompleteNewEntities", testCompleteNewEntities},
		{"CompleteMerge", testCompleteMerge},
		{"RelationsAccumulate", testRelationsAccumulate},
		{"CompleteAtomic", testCompleteAtomic},
		{"DeleteEpisode", testDeleteEpisode},
		{"DeleteConversation", testDeleteConversation},
		{"DeleteEntity", testDeleteEntity},
		{"FindEntity", testFindEntity},
		{"FindEntitiesByNames", testFindEntitiesByNames},
		{"ListEntities", testListEntities},
		{"RelationsAndEpisodes", testRelationsAndEpisodes},
		{"VectorSearch", testVectorSearch},
		{"KeywordSearch", testKeywordSearch},
		{"KeywordHostile", testKeywordHostile},
		{"Traverse", testTraverse},
		{"Neighbourhood", testNeighbourhood},
		{"Edges", testEdges},
		{"Communities", testCommunities},
		{"TenantsChangedSince", testTenantsChanged},
		{"Stats", testStats},
		{"Settings", testSettings},
		{"TenantIsolation", testTenantIsolation},
	}
	tests = append(tests, patternTests...)
	tests = append(tests, patternHeadTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

// --- helpers ---------------------------------------------------------------

// vec is a normalised vector with weight on the given axes.
func vec(parts ...float32) []float32 {
	v := make([]float32, Dims)
	copy(v, parts)
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

// axis is the unit vector along axis i.
func axis(i int) []float32 {
	v := make([]float32, Dims)
	v[i%Dims] = 1
	return v
}

var epClock atomic.Int64

// newEpisode is a pending episode with a unique id and a whole-millisecond
// CreatedAt later than every earlier one's.
func newEpisode(tenant, conv, content string) *store.Episode {
	ms := epClock.Add(1)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &store.Episode{
		ID:             uniq("ep_"),
		Tenant:         tenant,
		Source:         store.SourceUser,
		Content:        content,
		ConversationID: conv,
		CreatedAt:      base.Add(time.Duration(ms) * time.Millisecond),
		Status:         store.StatusPending,
	}
}

func mustCreate(t *testing.T, s store.Store, ep *store.Episode) *store.Episode {
	t.Helper()
	got, created, err := s.CreateEpisode(ctxT(t), ep)
	if err != nil {
		t.Fatalf("CreateEpisode: %v", err)
	}
	if !created {
		t.Fatalf("CreateEpisode %s: not created", ep.ID)
	}
	return got
}

// claim claims until it holds the episode id (other pending episodes it
// claims on the way are failed back to pending).
func claim(t *testing.T, s store.Store, owner, tenant, id string) *store.Episode {
	t.Helper()
	ctx := ctxT(t)
	var got *store.Episode
	testkit.Eventually(t, 10*time.Second, "claim "+id, func() bool {
		eps, err := s.ClaimEpisodes(ctx, owner, 100, time.Minute)
		if err != nil {
			t.Fatalf("ClaimEpisodes: %v", err)
		}
		for _, e := range eps {
			if e.ID == id && e.Tenant == tenant {
				got = e
				continue
			}
			_ = s.FailEpisode(ctx, e.Tenant, e.ID, owner, "", false)
		}
		return got != nil
	})
	return got
}

// ingest creates an episode, claims it and completes it with r.
func ingest(t *testing.T, s store.Store, tenant, conv string, r store.IngestResult) (*store.Episode, store.IngestOutcome) {
	t.Helper()
	ep := mustCreate(t, s, newEpisode(tenant, conv, "episode text"))
	claim(t, s, "owner-1", tenant, ep.ID)
	out, err := s.CompleteEpisode(ctxT(t), tenant, ep.ID, "owner-1", r)
	if err != nil {
		t.Fatalf("CompleteEpisode: %v", err)
	}
	if len(out.EntityIDs) != len(r.Entities) {
		t.Fatalf("CompleteEpisode: %d entity ids for %d entities", len(out.EntityIDs), len(r.Entities))
	}
	return ep, out
}

func ent(name, typ, summary string, v []float32) store.ExtractedEntity {
	return store.ExtractedEntity{Name: name, Type: typ, Summary: summary, Embedding: v}
}

func rel(src, tgt int, typ string, conf float64) store.ExtractedRelation {
	return store.ExtractedRelation{Source: src, Target: tgt, Type: typ, Fact: fmt.Sprintf("%d %s %d", src, typ, tgt), Confidence: conf}
}

func getEntity(t *testing.T, s store.Store, tenant, id string) *store.Entity {
	t.Helper()
	e, err := s.GetEntity(ctxT(t), tenant, id)
	if err != nil {
		t.Fatalf("GetEntity %s: %v", id, err)
	}
	return e
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: got %v, want ErrNotFound", what, err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func ids(sc []store.Scored) []string {
	out := make([]string, len(sc))
	for i, x := range sc {
		out[i] = x.ID
	}
	return out
}

func entityIDs(es []*store.Entity) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// relationBetween finds the tenant's relation a→b of typ via Relations.
func relationBetween(t *testing.T, s store.Store, tenant, a, b, typ string) *store.Relation {
	t.Helper()
	rs, err := s.Relations(ctxT(t), tenant, []string{a}, 100)
	if err != nil {
		t.Fatalf("Relations: %v", err)
	}
	for _, r := range rs {
		if r.SourceID == a && r.TargetID == b && r.Type == typ {
			return r
		}
	}
	return nil
}

// --- episodes --------------------------------------------------------------

func testEpisodeCreateGet(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	if s.Backend() == "" {
		t.Fatal("Backend is empty")
	}
	ep := newEpisode(tenant, "conv-1", "Acme sells widgets in Norway")
	ep.Source = store.SourceRun
	ep.RunID = "run-1"
	ep.Redactions = 2
	got := mustCreate(t, s, ep)
	if got.ID != ep.ID {
		t.Fatalf("created id %q, want %q", got.ID, ep.ID)
	}
	r, err := s.GetEpisode(ctx, tenant, ep.ID)
	if err != nil {
		t.Fatalf("GetEpisode: %v", err)
	}
	if r.Tenant != tenant || r.Content != ep.Content || r.ConversationID != "conv-1" || r.RunID != "run-1" ||
		r.Source != store.SourceRun || r.Status != store.StatusPending || r.Redactions != 2 || r.Attempts != 0 ||
		!r.CreatedAt.Equal(ep.CreatedAt) || !r.ProcessedAt.IsZero() || len(r.EntityIDs) != 0 {
		t.Fatalf("GetEpisode = %+v, want the stored episode %+v", r, ep)
	}
	_, err = s.GetEpisode(ctx, tenant, "ep_missing")
	wantNotFound(t, "GetEpisode(missing)", err)
}

func testEpisodeIdempotency(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	a := newEpisode(tenant, "", "first")
	a.IdempotencyKey = "key-1"
	mustCreate(t, s, a)
	b := newEpisode(tenant, "", "second")
	b.IdempotencyKey = "key-1"
	got, created, err := s.CreateEpisode(ctx, b)
	if err != nil {
		t.Fatalf("CreateEpisode (same key): %v", err)
	}
	if created || got.ID != a.ID || got.Content != "first" {
		t.Fatalf("CreateEpisode (same key) = %s %v, want the first episode %s and false", got.ID, created, a.ID)
	}
	if _, err := s.GetEpisode(ctx, tenant, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the duplicate was stored: %v", err)
	}
	// The key is per tenant.
	c := newEpisode(other, "", "other tenant")
	c.IdempotencyKey = "key-1"
	mustCreate(t, s, c)
	// Episodes without keys never collide.
	mustCreate(t, s, newEpisode(tenant, "", "no key 1"))
	mustCreate(t, s, newEpisode(tenant, "", "no key 2"))
	st, err := s.Stats(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if st.Episodes != 3 {
		t.Fatalf("Stats.Episodes = %d, want 3", st.Episodes)
	}
}

func testListEpisodes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	var all []*store.Episode
	for i := range 7 {
		conv := "conv-a"
		if i%2 == 1 {
			conv = "conv-b"
		}
		all = append(all, mustCreate(t, s, newEpisode(tenant, conv, fmt.Sprintf("episode %d", i))))
	}
	mustCreate(t, s, newEpisode(uniq("t"), "conv-a", "another tenant's"))
	// Newest first, paged.
	var got []string
	token := ""
	pages := 0
	for {
		eps, next, err := s.ListEpisodes(ctx, tenant, store.EpisodeFilter{}, store.Page{Size: 3, Token: token})
		if err != nil {
			t.Fatalf("ListEpisodes: %v", err)
		}
		if len(eps) > 3 {
			t.Fatalf("page of %d, want at most 3", len(eps))
		}
		for _, e := range eps {
			got = append(got, e.ID)
		}
		pages++
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		token = next
	}
	var want []string
	for i := len(all) - 1; i >= 0; i-- {
		want = append(want, all[i].ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListEpisodes = %v, want %v", got, want)
	}
	// Conversation filter.
	eps, _, err := s.ListEpisodes(ctx, tenant, store.EpisodeFilter{ConversationID: "conv-b"}, store.Page{Size: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 3 {
		t.Fatalf("conv-b has %d episodes, want 3", len(eps))
	}
	for _, e := range eps {
		if e.ConversationID != "conv-b" {
			t.Fatalf("filtered listing holds %s of %q", e.ID, e.ConversationID)
		}
	}
	// Status filter.
	claim(t, s, "o", tenant, all[0].ID)
	if err := s.FailEpisode(ctx, tenant, all[0].ID, "o", "broken", true); err != nil {
		t.Fatal(err)
	}
	eps, _, err = s.ListEpisodes(ctx, tenant, store.EpisodeFilter{Status: store.StatusFailed}, store.Page{Size: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].ID != all[0].ID || eps[0].Error != "broken" {
		t.Fatalf("failed episodes = %v, want %s", eps, all[0].ID)
	}
	eps, _, err = s.ListEpisodes(ctx, tenant, store.EpisodeFilter{Status: store.StatusPending, ConversationID: "conv-a"}, store.Page{Size: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 3 {
		t.Fatalf("pending conv-a episodes = %d, want 3", len(eps))
	}
	// Size 0 is the default; a malformed token is an error.
	eps, _, err = s.ListEpisodes(ctx, tenant, store.EpisodeFilter{}, store.Page{})
	if err != nil || len(eps) != 7 {
		t.Fatalf("ListEpisodes(size 0) = %d, %v; want 7", len(eps), err)
	}
	if _, _, err := s.ListEpisodes(ctx, tenant, store.EpisodeFilter{}, store.Page{Size: 2, Token: "!!not a token"}); err == nil {
		t.Fatal("a malformed page token was accepted")
	}
}

func testClaimCompleteFail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	ep := mustCreate(t, s, newEpisode(tenant, "", "x"))
	c := claim(t, s, "r1", tenant, ep.ID)
	if c.Status != store.StatusProcessing || c.Attempts != 1 || c.Content != "x" {
		t.Fatalf("claimed episode = %+v, want processing with 1 attempt", c)
	}
	// Nobody else gets it while the lease holds.
	eps, err := s.ClaimEpisodes(ctx, "r2", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if e.ID == ep.ID {
			t.Fatal("a leased episode was claimed again")
		}
		_ = s.FailEpisode(ctx, e.Tenant, e.ID, "r2", "", false)
	}
	// Another owner can neither fail nor complete it.
	if err := s.FailEpisode(ctx, tenant, ep.ID, "r2", "no", true); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("FailEpisode by a non-owner: %v, want ErrConflict", err)
	}
	if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "r2", store.IngestResult{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CompleteEpisode by a non-owner: %v, want ErrConflict", err)
	}
	// Retry: back to pending, claimable again with a second attempt.
	if err := s.FailEpisode(ctx, tenant, ep.ID, "r1", "transient", false); err != nil {
		t.Fatalf("FailEpisode(retry): %v", err)
	}
	g, err := s.GetEpisode(ctx, tenant, ep.ID)
	if err != nil || g.Status != store.StatusPending {
		t.Fatalf("after a retryable failure: %+v %v, want pending", g, err)
	}
	c = claim(t, s, "r1", tenant, ep.ID)
	if c.Attempts != 2 {
		t.Fatalf("attempts = %d, want 2", c.Attempts)
	}
	out, err := s.CompleteEpisode(ctx, tenant, ep.ID, "r1", store.IngestResult{})
	if err != nil {
		t.Fatalf("CompleteEpisode (empty result): %v", err)
	}
	if len(out.EntityIDs) != 0 {
		t.Fatalf("empty result wrote entities %v", out.EntityIDs)
	}
	g, err = s.GetEpisode(ctx, tenant, ep.ID)
	if err != nil || g.Status != store.StatusSynced || g.ProcessedAt.IsZero() {
		t.Fatalf("after CompleteEpisode: %+v %v, want synced with ProcessedAt", g, err)
	}
	// A synced episode is nobody's to complete again.
	if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "r1", store.IngestResult{}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CompleteEpisode twice: %v, want ErrConflict", err)
	}
	// Final failure.
	ep2 := mustCreate(t, s, newEpisode(tenant, "", "y"))
	claim(t, s, "r1", tenant, ep2.ID)
	if err := s.FailEpisode(ctx, tenant, ep2.ID, "r1", "model refused", true); err != nil {
		t.Fatal(err)
	}
	g, err = s.GetEpisode(ctx, tenant, ep2.ID)
	if err != nil || g.Status != store.StatusFailed || g.Error != "model refused" || g.ProcessedAt.IsZero() {
		t.Fatalf("after a final failure: %+v %v", g, err)
	}
	// Unknown episodes.
	if _, err := s.CompleteEpisode(ctx, tenant, "ep_missing", "r1", store.IngestResult{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CompleteEpisode(missing): %v, want ErrNotFound", err)
	}
	if err := s.FailEpisode(ctx, tenant, "ep_missing", "r1", "", false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FailEpisode(missing): %v, want ErrNotFound", err)
	}
}

func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	ep := mustCreate(t, s, newEpisode(tenant, "", "x"))
	var first *store.Episode
	testkit.Eventually(t, 10*time.Second, "first claim", func() bool {
		eps, err := s.ClaimEpisodes(ctx, "r1", 100, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			if e.ID == ep.ID {
				first = e
			}
		}
		return first != nil
	})
	// Once the lease runs out another replica takes it over.
	var second *store.Episode
	testkit.Eventually(t, 10*time.Second, "reclaim after the lease ran out", func() bool {
		eps, err := s.ClaimEpisodes(ctx, "r2", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			if e.ID == ep.ID {
				second = e
			}
		}
		return second != nil
	})
	if second.Attempts != 2 || second.Status != store.StatusProcessing {
		t.Fatalf("reclaimed episode = %+v, want processing, attempt 2", second)
	}
	// The replica that lost its lease cannot complete or fail it.
	_, err := s.CompleteEpisode(ctx, tenant, ep.ID, "r1", store.IngestResult{Entities: []store.ExtractedEntity{ent("Lost", "thing", "", axis(0))}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CompleteEpisode by the replica that lost its lease: %v, want ErrConflict", err)
	}
	if err := s.FailEpisode(ctx, tenant, ep.ID, "r1", "", false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("FailEpisode by the replica that lost its lease: %v, want ErrConflict", err)
	}
	if st, _ := s.Stats(ctx, tenant); st.Entities != 0 {
		t.Fatalf("the lost completion wrote %d entities", st.Entities)
	}
	if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "r2", store.IngestResult{}); err != nil {
		t.Fatalf("CompleteEpisode by the new owner: %v", err)
	}
}

func testConcurrentClaimers(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	const n = 40
	want := map[string]bool{}
	for i := range n {
		ep := mustCreate(t, s, newEpisode(tenant, "", fmt.Sprintf("e%d", i)))
		want[ep.ID] = true
	}
	var mu sync.Mutex
	owners := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("replica-%d", w)
			for range 30 {
				eps, err := s.ClaimEpisodes(ctx, owner, 3, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, e := range eps {
					if prev, dup := owners[e.ID]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("episode %s claimed by %s and %s", e.ID, prev, owner)
						return
					}
					owners[e.ID] = owner
				}
				done := len(owners) >= n
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id := range want {
		if owners[id] == "" {
			t.Fatalf("episode %s never claimed (%d of %d)", id, len(owners), n)
		}
	}
	// Oldest first: a fresh claim after one more episode gets nothing of
	// ours but the new one.
	ep := mustCreate(t, s, newEpisode(tenant, "", "late"))
	c := claim(t, s, "r9", tenant, ep.ID)
	if c.Attempts != 1 {
		t.Fatalf("attempts = %d", c.Attempts)
	}
}

// --- CompleteEpisode -------------------------------------------------------

func testCompleteNewEntities(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	r := store.IngestResult{
		Entities: []store.ExtractedEntity{
			{Name: "Acme Corp", Type: "organization", Summary: "A maker of widgets", Attributes: map[string]string{"country": "Norway"}, Embedding: axis(0)},
			{Name: "Widget", Type: "product", Summary: "A small gadget", Embedding: axis(1)},
		},
		Relations: []store.ExtractedRelation{rel(0, 1, "SELLS", 0.8)},
	}
	before := time.Now().Add(-time.Second)
	ep, out := ingest(t, s, tenant, "c1", r)
	if len(out.CreatedIDs) != 2 || !slices.Equal(out.CreatedIDs, out.EntityIDs) {
		t.Fatalf("outcome = %+v, want two created entities", out)
	}
	if len(out.RelationIDs) != 1 {
		t.Fatalf("relation ids = %v, want 1", out.RelationIDs)
	}
	if out.EntityIDs[0] == out.EntityIDs[1] || out.EntityIDs[0] == "" {
		t.Fatalf("entity ids = %v", out.EntityIDs)
	}
	a := getEntity(t, s, tenant, out.EntityIDs[0])
	if a.Tenant != tenant || a.Name != "Acme Corp" || a.Type != "organization" || a.Summary != "A maker of widgets" ||
		a.Attributes["country"] != "Norway" || len(a.Aliases) != 0 || a.MentionCount != 1 || a.CommunityID != "" {
		t.Fatalf("entity = %+v", a)
	}
	if len(a.Embedding) != Dims || !near(float64(a.Embedding[0]), 1) {
		t.Fatalf("embedding = %v, want %v", a.Embedding, axis(0))
	}
	if a.CreatedAt.Before(before) || a.UpdatedAt.Before(before) {
		t.Fatalf("timestamps %v %v before %v", a.CreatedAt, a.UpdatedAt, before)
	}
	g, err := s.GetEpisode(ctx, tenant, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(g.EntityIDs)
	sort.Strings(got)
	want := slices.Clone(out.EntityIDs)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("episode mentions %v, want %v", got, want)
	}
	re := relationBetween(t, s, tenant, out.EntityIDs[0], out.EntityIDs[1], "SELLS")
	if re == nil || re.ID != out.RelationIDs[0] || !near(re.Weight, 0.8) || re.EpisodeCount != 1 || re.Fact != "0 SELLS 1" || re.Tenant != tenant {
		t.Fatalf("relation = %+v", re)
	}
	// GetEntities leaves missing ids out.
	es, err := s.GetEntities(ctx, tenant, []string{out.EntityIDs[1], "en_missing", out.EntityIDs[0]})
	if err != nil || len(es) != 2 {
		t.Fatalf("GetEntities = %v, %v; want 2", es, err)
	}
	if _, err := s.GetEntity(ctx, tenant, "en_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetEntity(missing): %v", err)
	}
}

func testCompleteMerge(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, out := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "Acme Corp", Type: "organization", Summary: "old summary", Attributes: map[string]string{"country": "Norway", "size": "small"}, Embedding: axis(0)},
		{Name: "Bob", Type: "person", Summary: "a person", Embedding: axis(2)},
	}})
	acme, bob := out.EntityIDs[0], out.EntityIDs[1]
	ep2, out2 := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{MergeInto: acme, Name: "ACME", Type: "organization", Summary: "new summary", Attributes: map[string]string{"size": "large", "founded": "1990"}, Embedding: axis(0)},
		{MergeInto: bob, Name: "bob", Type: "person", Embedding: axis(2)},
		{Name: "Oslo", Type: "place", Embedding: axis(3)},
	}})
	if out2.EntityIDs[0] != acme || out2.EntityIDs[1] != bob || len(out2.CreatedIDs) != 1 || out2.CreatedIDs[0] != out2.EntityIDs[2] {
		t.Fatalf("merge outcome = %+v (acme %s, bob %s)", out2, acme, bob)
	}
	if !slices.Contains(out2.ChangedSummary, acme) {
		t.Fatalf("ChangedSummary %v lacks the merged entity whose summary changed", out2.ChangedSummary)
	}
	if slices.Contains(out2.ChangedSummary, bob) {
		t.Fatalf("ChangedSummary %v holds an entity that did not change", out2.ChangedSummary)
	}
	a := getEntity(t, s, tenant, acme)
	if a.Name != "Acme Corp" || a.Summary != "new summary" || !slices.Contains(a.Aliases, "ACME") || len(a.Aliases) != 1 {
		t.Fatalf("merged entity = %+v", a)
	}
	if a.Attributes["country"] != "Norway" || a.Attributes["size"] != "large" || a.Attributes["founded"] != "1990" {
		t.Fatalf("merged attributes = %v", a.Attributes)
	}
	if a.MentionCount != 2 {
		t.Fatalf("mention count = %d, want 2", a.MentionCount)
	}
	b := getEntity(t, s, tenant, bob)
	if len(b.Aliases) != 0 || b.Summary != "a person" {
		t.Fatalf("a merge with the same name (other case) and no summary changed %+v", b)
	}
	// Merging the same alias again does not repeat it.
	ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: acme, Name: "acme", Type: "organization", Embedding: axis(0)}}})
	if a := getEntity(t, s, tenant, acme); len(a.Aliases) != 1 || a.MentionCount != 3 {
		t.Fatalf("after a third merge: aliases %v mentions %d, want [ACME] and 3", a.Aliases, a.MentionCount)
	}
	g, _ := s.GetEpisode(ctx, tenant, ep2.ID)
	if len(g.EntityIDs) != 3 {
		t.Fatalf("episode 2 mentions %v, want 3", g.EntityIDs)
	}
	st, _ := s.Stats(ctx, tenant)
	if st.Entities != 3 {
		t.Fatalf("entities = %d, want 3", st.Entities)
	}
}

func testRelationsAccumulate(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, out := ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1))},
		Relations: []store.ExtractedRelation{rel(0, 1, "KNOWS", 0.5)},
	})
	a, b := out.EntityIDs[0], out.EntityIDs[1]
	ep2, out2 := ingest(t, s, tenant, "", store.IngestResult{
		Entities: []store.ExtractedEntity{
			{MergeInto: a, Name: "A", Type: "x", Embedding: axis(0)},
			{MergeInto: b, Name: "B", Type: "x", Embedding: axis(1)},
		},
		Relations: []store.ExtractedRelation{
			rel(0, 1, "KNOWS", 0.4), rel(0, 1, "KNOWS", 0.6), // same episode twice: the higher counts once
			rel(1, 0, "KNOWS", 0.3), // the other direction is another relation
			rel(0, 0, "SELF", 0.9),  // self-loops are skipped
		},
	})
	if out2.RelationIDs[0] != out.RelationIDs[0] {
		t.Fatalf("support again made relation %s, want %s", out2.RelationIDs[0], out.RelationIDs[0])
	}
	r := relationBetween(t, s, tenant, a, b, "KNOWS")
	if r == nil || r.EpisodeCount != 2 || !near(r.Weight, 1-(1-0.5)*(1-0.6)) {
		t.Fatalf("accumulated relation = %+v, want 2 episodes and weight 0.8", r)
	}
	if back := relationBetween(t, s, tenant, b, a, "KNOWS"); back == nil || back.EpisodeCount != 1 || !near(back.Weight, 0.3) {
		t.Fatalf("reverse relation = %+v", back)
	}
	if self := relationBetween(t, s, tenant, a, a, "SELF"); self != nil {
		t.Fatalf("a self-loop was stored: %+v", self)
	}
	st, _ := s.Stats(ctx, tenant)
	if st.Relations != 2 {
		t.Fatalf("relations = %d, want 2", st.Relations)
	}
	// Removing the second episode's support recomputes the relation.
	if _, err := s.DeleteEpisode(ctx, tenant, ep2.ID); err != nil {
		t.Fatal(err)
	}
	r = relationBetween(t, s, tenant, a, b, "KNOWS")
	if r == nil || r.EpisodeCount != 1 || !near(r.Weight, 0.5) {
		t.Fatalf("after removing a support: %+v, want 1 episode, weight 0.5", r)
	}
	if back := relationBetween(t, s, tenant, b, a, "KNOWS"); back != nil {
		t.Fatalf("a relation no episode supports survived: %+v", back)
	}
}

func testCompleteAtomic(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, out := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{ent("Keep", "x", "kept", axis(0))}})
	keep := out.EntityIDs[0]
	ep := mustCreate(t, s, newEpisode(tenant, "", "bad"))
	claim(t, s, "o", tenant, ep.ID)
	bad := []store.IngestResult{
		{ // a relation pointing past the entities
			Entities:  []store.ExtractedEntity{{MergeInto: keep, Name: "Kept", Type: "x", Summary: "changed"}, ent("New", "x", "", axis(1))},
			Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5), rel(0, 7, "R", 0.5)},
		},
		{ // a merge into an unknown entity
			Entities: []store.ExtractedEntity{ent("New", "x", "", axis(1)), {MergeInto: "en_missing", Name: "Ghost", Type: "x"}},
		},
	}
	for i, r := range bad {
		if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "o", r); err == nil {
			t.Fatalf("bad result %d was accepted", i)
		}
	}
	if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "o", bad[1]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("merge into a missing entity: %v, want ErrNotFound", err)
	}
	st, _ := s.Stats(ctx, tenant)
	if st.Entities != 1 || st.Relations != 0 {
		t.Fatalf("a failed completion left %d entities, %d relations", st.Entities, st.Relations)
	}
	if k := getEntity(t, s, tenant, keep); k.Summary != "kept" || k.MentionCount != 1 {
		t.Fatalf("a failed completion changed %+v", k)
	}
	g, _ := s.GetEpisode(ctx, tenant, ep.ID)
	if g.Status != store.StatusProcessing || len(g.EntityIDs) != 0 {
		t.Fatalf("a failed completion changed the episode: %+v", g)
	}
	// The owner still holds it and can complete it properly.
	if _, err := s.CompleteEpisode(ctx, tenant, ep.ID, "o", store.IngestResult{Entities: []store.ExtractedEntity{ent("New", "x", "", axis(1))}}); err != nil {
		t.Fatalf("CompleteEpisode after failed attempts: %v", err)
	}
}

// --- deletes ---------------------------------------------------------------

func testDeleteEpisode(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	// Episode 1 mentions A, B (A→B); episode 2 mentions B, C (B→C).
	ep1, o1 := ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5)},
	})
	a, b := o1.EntityIDs[0], o1.EntityIDs[1]
	_, o2 := ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{{MergeInto: b, Name: "B", Type: "x"}, ent("C", "x", "", axis(2))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5)},
	})
	c := o2.EntityIDs[1]
	out, err := s.DeleteEpisode(ctx, tenant, ep1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Episodes != 1 || out.Entities != 1 || out.Relations != 1 {
		t.Fatalf("DeleteEpisode = %+v, want 1 episode, 1 entity (A), 1 relation (A→B)", out)
	}
	if _, err := s.GetEntity(ctx, tenant, a); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("A survived: %v", err)
	}
	if e := getEntity(t, s, tenant, b); e.MentionCount != 1 {
		t.Fatalf("B mention count = %d, want 1", e.MentionCount)
	}
	getEntity(t, s, tenant, c)
	if _, err := s.GetEpisode(ctx, tenant, ep1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the episode survived: %v", err)
	}
	if r := relationBetween(t, s, tenant, b, c, "R"); r == nil {
		t.Fatal("B→C was removed")
	}
	// The deleted entity is gone from every search.
	if hits, _ := s.VectorSearch(ctx, tenant, axis(0), 10, nil); slices.Contains(ids(hits), a) {
		t.Fatal("a deleted entity is still found by vector")
	}
	_, err = s.DeleteEpisode(ctx, tenant, ep1.ID)
	wantNotFound(t, "DeleteEpisode twice", err)
}

func testDeleteConversation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o1 := ingest(t, s, tenant, "conv-x", store.IngestResult{Entities: []store.ExtractedEntity{ent("Only X", "x", "", axis(0)), ent("Shared", "x", "", axis(1))}})
	ingest(t, s, tenant, "conv-x", store.IngestResult{Entities: []store.ExtractedEntity{ent("Only X 2", "x", "", axis(2))}})
	mustCreate(t, s, newEpisode(tenant, "conv-x", "still pending"))
	_, o3 := ingest(t, s, tenant, "conv-y", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: o1.EntityIDs[1], Name: "Shared", Type: "x"}}})
	out, err := s.DeleteConversation(ctx, tenant, "conv-x")
	if err != nil {
		t.Fatal(err)
	}
	if out.Episodes != 3 || out.Entities != 2 {
		t.Fatalf("DeleteConversation = %+v, want 3 episodes, 2 entities", out)
	}
	if e := getEntity(t, s, tenant, o3.EntityIDs[0]); e.MentionCount != 1 {
		t.Fatalf("shared entity mentions = %d", e.MentionCount)
	}
	eps, _, _ := s.ListEpisodes(ctx, tenant, store.EpisodeFilter{}, store.Page{Size: 50})
	if len(eps) != 1 || eps[0].ConversationID != "conv-y" {
		t.Fatalf("episodes left = %v", eps)
	}
	out, err = s.DeleteConversation(ctx, tenant, "conv-none")
	if err != nil || out != (store.DeleteOutcome{}) {
		t.Fatalf("DeleteConversation(empty) = %+v, %v", out, err)
	}
}

func testDeleteEntity(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	ep, o := ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1)), ent("C", "x", "", axis(2))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5), rel(2, 0, "R", 0.5), rel(1, 2, "R", 0.5)},
	})
	out, err := s.DeleteEntity(ctx, tenant, o.EntityIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	if out.Entities != 1 || out.Relations != 2 || out.Episodes != 0 {
		t.Fatalf("DeleteEntity = %+v, want 1 entity, 2 relations", out)
	}
	g, err := s.GetEpisode(ctx, tenant, ep.ID)
	if err != nil || slices.Contains(g.EntityIDs, o.EntityIDs[0]) || len(g.EntityIDs) != 2 {
		t.Fatalf("episode after DeleteEntity: %+v %v", g, err)
	}
	st, _ := s.Stats(ctx, tenant)
	if st.Entities != 2 || st.Relations != 1 {
		t.Fatalf("stats = %+v", st)
	}
	_, err = s.DeleteEntity(ctx, tenant, o.EntityIDs[0])
	wantNotFound(t, "DeleteEntity twice", err)
	if hits, _ := s.KeywordSearch(ctx, tenant, "A", 10, nil); slices.Contains(ids(hits), o.EntityIDs[0]) {
		t.Fatal("a deleted entity is still found by keyword")
	}
}

// --- reads -----------------------------------------------------------------

func testFindEntity(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		ent("Acme Corp", "organization", "", axis(0)),
		ent("Mercury", "planet", "", axis(1)),
		ent("Mercury", "element", "", axis(2)),
	}})
	ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: o.EntityIDs[0], Name: "ACME Inc", Type: "organization"}}})
	for _, q := range []string{"acme corp", "ACME CORP", "Acme Corp", "acme inc"} {
		e, err := s.FindEntity(ctx, tenant, q, "")
		if err != nil || e.ID != o.EntityIDs[0] {
			t.Fatalf("FindEntity(%q) = %v, %v", q, e, err)
		}
	}
	e, err := s.FindEntity(ctx, tenant, "acme inc", "organization")
	if err != nil || e.ID != o.EntityIDs[0] {
		t.Fatalf("FindEntity(alias, type) = %v, %v", e, err)
	}
	_, err = s.FindEntity(ctx, tenant, "acme corp", "person")
	wantNotFound(t, "FindEntity(wrong type)", err)
	_, err = s.FindEntity(ctx, tenant, "acme", "")
	wantNotFound(t, "FindEntity(prefix)", err)
	e, err = s.FindEntity(ctx, tenant, "mercury", "element")
	if err != nil || e.ID != o.EntityIDs[2] {
		t.Fatalf("FindEntity(mercury, element) = %v, %v", e, err)
	}
	e, err = s.FindEntity(ctx, tenant, "MERCURY", "planet")
	if err != nil || e.ID != o.EntityIDs[1] {
		t.Fatalf("FindEntity(MERCURY, planet) = %v, %v", e, err)
	}
}

func testListEntities(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	names := []string{"delta", "Alpha", "charlie", "Bravo", "alpine", "echo", "Beta"}
	var es []store.ExtractedEntity
	for i, n := range names {
		typ := "a"
		if i%2 == 1 {
			typ = "b"
		}
		es = append(es, ent(n, typ, "", axis(i)))
	}
	ingest(t, s, tenant, "", store.IngestResult{Entities: es})
	ingest(t, s, uniq("t"), "", store.IngestResult{Entities: []store.ExtractedEntity{ent("Aardvark", "a", "", axis(0))}})
	var got []string
	token := ""
	for range 10 {
		page, next, err := s.ListEntities(ctx, tenant, store.EntityFilter{}, store.Page{Size: 2, Token: token})
		if err != nil {
			t.Fatalf("ListEntities: %v", err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d", len(page))
		}
		for _, e := range page {
			got = append(got, e.Name)
		}
		if next == "" {
			break
		}
		token = next
	}
	want := []string{"Alpha", "alpine", "Beta", "Bravo", "charlie", "delta", "echo"}
	if !slices.Equal(got, want) {
		t.Fatalf("ListEntities = %v, want %v", got, want)
	}
	page, _, err := s.ListEntities(ctx, tenant, store.EntityFilter{NamePrefix: "AL"}, store.Page{Size: 10})
	if err != nil || len(page) != 2 || page[0].Name != "Alpha" || page[1].Name != "alpine" {
		t.Fatalf("ListEntities(prefix AL) = %v, %v", page, err)
	}
	page, _, err = s.ListEntities(ctx, tenant, store.EntityFilter{Type: "b"}, store.Page{Size: 10})
	if err != nil || len(page) != 3 {
		t.Fatalf("ListEntities(type b) = %d, %v; want 3", len(page), err)
	}
	for _, e := range page {
		if e.Type != "b" {
			t.Fatalf("type filter let %+v through", e)
		}
	}
	page, _, err = s.ListEntities(ctx, tenant, store.EntityFilter{Type: "a", NamePrefix: "a"}, store.Page{Size: 10})
	if err != nil || len(page) != 1 || page[0].Name != "alpine" {
		t.Fatalf("ListEntities(type a, prefix a) = %v, %v", entityIDs(page), err)
	}
	// Prefix is literal text, not a pattern.
	page, _, err = s.ListEntities(ctx, tenant, store.EntityFilter{NamePrefix: "%"}, store.Page{Size: 10})
	if err != nil || len(page) != 0 {
		t.Fatalf("ListEntities(prefix %%) = %d, %v; want none", len(page), err)
	}
	page, _, err = s.ListEntities(ctx, tenant, store.EntityFilter{NamePrefix: "_lpha"}, store.Page{Size: 10})
	if err != nil || len(page) != 0 {
		t.Fatalf("ListEntities(prefix _lpha) = %d, %v; want none", len(page), err)
	}
	if _, _, err := s.ListEntities(ctx, tenant, store.EntityFilter{}, store.Page{Size: 2, Token: "%%%garbage"}); err == nil {
		t.Fatal("a malformed page token was accepted")
	}
}

func testRelationsAndEpisodes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{
		Entities: []store.ExtractedEntity{ent("Hub", "x", "", axis(0)), ent("S1", "x", "", axis(1)), ent("S2", "x", "", axis(2)), ent("S3", "x", "", axis(3))},
		Relations: []store.ExtractedRelation{
			rel(0, 1, "R", 0.2), rel(2, 0, "R", 0.9), rel(0, 3, "R", 0.5), rel(1, 2, "R", 0.7),
		},
	})
	hub := o.EntityIDs[0]
	rs, err := s.Relations(ctx, tenant, []string{hub}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || !near(rs[0].Weight, 0.9) || !near(rs[1].Weight, 0.5) {
		t.Fatalf("Relations(hub, 2) = %+v, want the 0.9 and 0.5 edges", rs)
	}
	rs, err = s.Relations(ctx, tenant, []string{hub, o.EntityIDs[1]}, 10)
	if err != nil || len(rs) != 4 {
		t.Fatalf("Relations(hub, S1) = %d, %v; want 4 distinct", len(rs), err)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].Weight > rs[i-1].Weight {
			t.Fatalf("Relations not strongest first: %+v", rs)
		}
	}
	// EntityEpisodes newest first.
	var eps []string
	for range 3 {
		ep, _ := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: hub, Name: "Hub", Type: "x"}}})
		eps = append(eps, ep.ID)
	}
	got, err := s.EntityEpisodes(ctx, tenant, hub, 2)
	if err != nil || len(got) != 2 || got[0].ID != eps[2] || got[1].ID != eps[1] {
		t.Fatalf("EntityEpisodes = %v, %v; want %v", got, err, []string{eps[2], eps[1]})
	}
}

// --- search ----------------------------------------------------------------

func testVectorSearch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		ent("E0", "a", "", vec(1, 0, 0)),
		ent("E1", "b", "", vec(0.9, 0.1, 0)),
		ent("E2", "a", "", vec(0.5, 0.5, 0)),
		ent("E3", "b", "", vec(0, 1, 0)),
		ent("E4", "a", "", vec(-1, 0, 0)),
	}})
	ingest(t, s, uniq("t"), "", store.IngestResult{Entities: []store.ExtractedEntity{ent("Other", "a", "", vec(1, 0, 0))}})
	hits, err := s.VectorSearch(ctx, tenant, vec(1, 0, 0), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{o.EntityIDs[0], o.EntityIDs[1], o.EntityIDs[2]}
	if !slices.Equal(ids(hits), want) {
		t.Fatalf("VectorSearch = %v, want %v", ids(hits), want)
	}
	if !near(hits[0].Score, 1) || !near(hits[1].Score, float64(vec(0.9, 0.1)[0])) {
		t.Fatalf("scores = %+v, want cosine", hits)
	}
	// A query that is not normalised ranks the same.
	hits, err = s.VectorSearch(ctx, tenant, []float32{3, 0, 0, 0, 0, 0, 0, 0}, 3, nil)
	if err != nil || !slices.Equal(ids(hits), want) || !near(hits[0].Score, 1) {
		t.Fatalf("VectorSearch(unnormalised) = %+v, %v", hits, err)
	}
	hits, err = s.VectorSearch(ctx, tenant, vec(1, 0, 0), 10, []string{"b"})
	if err != nil || !slices.Equal(ids(hits), []string{o.EntityIDs[1], o.EntityIDs[3]}) {
		t.Fatalf("VectorSearch(type b) = %v, %v", ids(hits), err)
	}
	hits, err = s.VectorSearch(ctx, tenant, vec(1, 0, 0), 10, nil)
	if err != nil || len(hits) != 5 || hits[4].ID != o.EntityIDs[4] {
		t.Fatalf("VectorSearch(all) = %v, %v", ids(hits), err)
	}
	// Changes are seen by the next search.
	_, o2 := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{ent("Exact", "a", "", vec(0.2, 0, 0.9))}})
	hits, err = s.VectorSearch(ctx, tenant, vec(0.2, 0, 0.9), 1, nil)
	if err != nil || len(hits) != 1 || hits[0].ID != o2.EntityIDs[0] {
		t.Fatalf("VectorSearch after a new entity = %v, %v", ids(hits), err)
	}
	if _, err := s.DeleteEntity(ctx, tenant, o2.EntityIDs[0]); err != nil {
		t.Fatal(err)
	}
	hits, err = s.VectorSearch(ctx, tenant, vec(0.2, 0, 0.9), 1, nil)
	if err != nil || len(hits) != 1 || hits[0].ID == o2.EntityIDs[0] {
		t.Fatalf("VectorSearch after a delete = %v, %v", ids(hits), err)
	}
	hits, err = s.VectorSearch(ctx, uniq("t"), vec(1, 0, 0), 10, nil)
	if err != nil || len(hits) != 0 {
		t.Fatalf("VectorSearch(empty tenant) = %v, %v", hits, err)
	}
}

func testKeywordSearch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "Acme Widgets", Type: "organization", Summary: "Sells gadgets across Norway", Embedding: axis(0)},
		{Name: "Widget Factory", Type: "place", Summary: "Where things are built", Embedding: axis(1)},
		{Name: "Bergen Office", Type: "place", Summary: "An office", Attributes: map[string]string{"city": "Stavanger"}, Embedding: axis(2)},
		{Name: "Unrelated", Type: "thing", Summary: "Nothing to see", Embedding: axis(3)},
	}})
	ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: o.EntityIDs[3], Name: "Zeppelin", Type: "thing"}}})
	ingest(t, s, uniq("t"), "", store.IngestResult{Entities: []store.ExtractedEntity{ent("Norway Widgets", "organization", "gadgets in Norway", axis(0))}})

	check := func(q string, types []string, want ...string) []store.Scored {
		t.Helper()
		hits, err := s.KeywordSearch(ctx, tenant, q, 10, types)
		if err != nil {
			t.Fatalf("KeywordSearch(%q): %v", q, err)
		}
		got := ids(hits)
		sort.Strings(got)
		w := slices.Clone(want)
		sort.Strings(w)
		if !slices.Equal(got, w) {
			t.Fatalf("KeywordSearch(%q, %v) = %v, want %v", q, types, ids(hits), want)
		}
		for i, h := range hits {
			if h.Score <= 0 || (i > 0 && h.Score > hits[i-1].Score) {
				t.Fatalf("KeywordSearch(%q) scores %+v: want positive, best first", q, hits)
			}
		}
		return hits
	}
	check("norway", nil, o.EntityIDs[0])                          // summary
	check("ZEPPELIN", nil, o.EntityIDs[3])                        // alias
	check("stavanger", nil, o.EntityIDs[2])                       // attribute value
	check("office", []string{"place"}, o.EntityIDs[2])            // name, type filter
	check("office", []string{"organization", "thing"})            // filtered out
	check("factory gadgets", nil, o.EntityIDs[0], o.EntityIDs[1]) // any word
	check("acme norway sells", nil, o.EntityIDs[0])
	hits := check("widgets widget acme", nil, o.EntityIDs[0], o.EntityIDs[1]) // more words rank higher
	if hits[0].ID != o.EntityIDs[0] {
		t.Fatalf("the entity matching more words ranks %v", ids(hits))
	}
	check("", nil)
	check("   ", nil)
	check("zzqx-qqzy", nil)

	// Codes and dates written with hyphens are found as written, first.
	_, codes := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "ORD-1002", Type: "order", Summary: "Placed on 2025-01-03", Embedding: axis(4)},
		{Name: "ORD-1003", Type: "order", Summary: "Placed on 2025-02-11", Embedding: axis(5)},
	}})
	for q, want := range map[string]string{"ORD-1002": codes.EntityIDs[0], "ord-1003": codes.EntityIDs[1], "2025-01-03": codes.EntityIDs[0], "placed 2025-02-11": codes.EntityIDs[1]} {
		hits, err := s.KeywordSearch(ctx, tenant, q, 10, []string{"order"})
		if err != nil || len(hits) == 0 || hits[0].ID != want {
			t.Fatalf("KeywordSearch(%q) = %v, %v; want %s first", q, hits, err, want)
		}
	}
	hits, err := s.KeywordSearch(ctx, tenant, "office widget acme norway factory", 1, nil)
	if err != nil || len(hits) != 1 {
		t.Fatalf("KeywordSearch(k=1) = %v, %v", hits, err)
	}
}

// hostileQueries are keyword queries that must neither fail nor act as
// syntax.
var hostileQueries = []string{
	`"`, `""`, `"unterminated`, `'`, `''; DROP TABLE entities; --`, `*`, `acme*`, `^acme`, `-acme`, `+acme`,
	`acme AND`, `OR`, `AND OR NOT`, `NOT acme`, `NEAR(acme widgets)`, `name:acme`, `{name}: acme`,
	`(acme`, `acme)`, `acme & widgets | norway`, `!acme`, `acme <-> widgets`, `a:*`, `\`, `\\'`,
	`%`, `_`, `acme:*B`, "\x00", "acme\x00widgets", `ö ü ß 日本語`, strings.Repeat("acme ", 300),
	`$$`, `$1`, `?`, `@@`, `~`, `:`, `.`, `..`, `NEAR/2`, `COLUMN`, "\ttab\nnewline",
}

func testKeywordHostile(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "Acme Widgets", Type: "organization", Summary: "Sells in Norway", Embedding: axis(0)},
	}})
	for _, q := range hostileQueries {
		if _, err := s.KeywordSearch(ctx, tenant, q, 10, nil); err != nil {
			t.Errorf("KeywordSearch(%q): %v", q, err)
		}
	}
	// Operators are words or separators: these still find Acme by its words.
	for _, q := range []string{`acme AND`, `NOT acme`, `name:acme`, `(acme`, `"acme`, `acme*`, `-acme`, `acme OR zzz`} {
		hits, err := s.KeywordSearch(ctx, tenant, q, 10, nil)
		if err != nil || len(hits) != 1 || hits[0].ID != o.EntityIDs[0] {
			t.Errorf("KeywordSearch(%q) = %v, %v; want Acme", q, hits, err)
		}
	}
	if _, err := s.GetEntity(ctx, tenant, o.EntityIDs[0]); err != nil {
		t.Fatalf("the entity is gone after hostile queries: %v", err)
	}
	if st, err := s.Stats(ctx, tenant); err != nil || st.Entities != 1 {
		t.Fatalf("stats after hostile queries: %+v %v", st, err)
	}
}

func testTraverse(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	// S -0.9- A -0.9- B ; S -0.5- B (direct, weaker than via A: 0.81) ;
	// B -0.5- C ; C -0.5- D ; A <-0.4- E (reverse direction)
	_, o := ingest(t, s, tenant, "", store.IngestResult{
		Entities: []store.ExtractedEntity{
			ent("S", "x", "", axis(0)), ent("A", "x", "", axis(1)), ent("B", "y", "", axis(2)),
			ent("C", "x", "", axis(3)), ent("D", "x", "", axis(4)), ent("E", "y", "", axis(5)),
		},
		Relations: []store.ExtractedRelation{
			rel(0, 1, "R", 0.9), rel(1, 2, "R", 0.9), rel(0, 2, "R", 0.5),
			rel(2, 3, "R", 0.5), rel(3, 4, "R", 0.5), rel(5, 1, "R", 0.4),
		},
	})
	S, A, B, C, D, E := o.EntityIDs[0], o.EntityIDs[1], o.EntityIDs[2], o.EntityIDs[3], o.EntityIDs[4], o.EntityIDs[5]
	hits, err := s.Traverse(ctx, tenant, []string{S}, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.GraphHit{{ID: A, Hops: 1, Weight: 0.9}, {ID: B, Hops: 2, Weight: 0.81}, {ID: E, Hops: 2, Weight: 0.36}, {ID: C, Hops: 2, Weight: 0.25}}
	checkHits := func(what string, got, want []store.GraphHit) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s = %+v, want %+v", what, got, want)
		}
		for i := range want {
			if got[i].ID != want[i].ID || got[i].Hops != want[i].Hops || !near(got[i].Weight, want[i].Weight) {
				t.Fatalf("%s = %+v, want %+v", what, got, want)
			}
		}
	}
	checkHits("Traverse(S, 2)", hits, want)
	hits, err = s.Traverse(ctx, tenant, []string{S}, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	checkHits("Traverse(S, 1)", hits, []store.GraphHit{{ID: A, Hops: 1, Weight: 0.9}, {ID: B, Hops: 1, Weight: 0.5}})
	hits, err = s.Traverse(ctx, tenant, []string{S}, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkHits("Traverse(S, 3, limit 2)", hits, []store.GraphHit{{ID: A, Hops: 1, Weight: 0.9}, {ID: B, Hops: 2, Weight: 0.81}})
	// Seeds are excluded, even when reachable from another seed.
	hits, err = s.Traverse(ctx, tenant, []string{S, A}, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.ID == S || h.ID == A {
			t.Fatalf("Traverse returned a seed: %+v", hits)
		}
	}
	if len(hits) != 2 || hits[0].ID != B || !near(hits[0].Weight, 0.9) || hits[1].ID != E {
		t.Fatalf("Traverse(S+A, 1) = %+v, want B (0.9) then E", hits)
	}
	hits, err = s.Traverse(ctx, tenant, []string{S}, 3, 10)
	if err != nil || len(hits) != 5 || hits[len(hits)-1].ID != D || hits[len(hits)-1].Hops != 3 {
		t.Fatalf("Traverse(S, 3) = %+v, %v; want D last at 3 hops", hits, err)
	}
	hits, err = s.Traverse(ctx, tenant, []string{"en_missing"}, 2, 10)
	if err != nil || len(hits) != 0 {
		t.Fatalf("Traverse(unknown seed) = %v, %v", hits, err)
	}
	hits, err = s.Traverse(ctx, tenant, nil, 2, 10)
	if err != nil || len(hits) != 0 {
		t.Fatalf("Traverse(no seeds) = %v, %v", hits, err)
	}
}

func testNeighbourhood(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	// Centre with five neighbours (weights .1 .. .5), one of which has a
	// neighbour of its own.
	es := []store.ExtractedEntity{ent("Centre", "x", "", axis(0))}
	var rels []store.ExtractedRelation
	for i := 1; i <= 5; i++ {
		es = append(es, ent(fmt.Sprintf("N%d", i), "x", "", axis(i)))
		rels = append(rels, rel(0, i, "R", float64(i)/10))
	}
	es = append(es, ent("Far", "x", "", axis(6)))
	rels = append(rels, rel(5, 6, "R", 0.9))
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: es, Relations: rels})
	centre := o.EntityIDs[0]
	g, err := s.Neighbourhood(ctx, tenant, centre, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Entities) != 6 || g.Entities[0].ID != centre || g.Truncated || len(g.Relations) != 5 {
		t.Fatalf("Neighbourhood(1) = %d entities (first %s), %d relations, truncated %v", len(g.Entities), g.Entities[0].ID, len(g.Relations), g.Truncated)
	}
	g, err = s.Neighbourhood(ctx, tenant, centre, 2, 100)
	if err != nil || len(g.Entities) != 7 || len(g.Relations) != 6 || g.Truncated {
		t.Fatalf("Neighbourhood(2) = %+v, %v", g, err)
	}
	g, err = s.Neighbourhood(ctx, tenant, centre, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Truncated || len(g.Entities) != 3 || g.Entities[0].ID != centre {
		t.Fatalf("Neighbourhood(2, max 3) = %d entities, truncated %v", len(g.Entities), g.Truncated)
	}
	// The strongest neighbours are kept.
	kept := entityIDs(g.Entities[1:])
	sort.Strings(kept)
	want := []string{o.EntityIDs[4], o.EntityIDs[5]}
	sort.Strings(want)
	if !slices.Equal(kept, want) {
		t.Fatalf("truncated neighbourhood kept %v, want N4, N5 %v", kept, want)
	}
	for _, r := range g.Relations {
		in := func(id string) bool { return slices.Contains(entityIDs(g.Entities), id) }
		if !in(r.SourceID) || !in(r.TargetID) {
			t.Fatalf("relation %+v leaves the returned entities", r)
		}
	}
	// Communities of the returned entities come along.
	co := &store.Community{ID: uniq("co_"), Name: "Group", MemberIDs: []string{centre, o.EntityIDs[1], o.EntityIDs[2]}}
	if err := s.ReplaceCommunities(ctx, tenant, []*store.Community{co}); err != nil {
		t.Fatal(err)
	}
	g, err = s.Neighbourhood(ctx, tenant, centre, 1, 100)
	if err != nil || len(g.Communities) != 1 || g.Communities[0].ID != co.ID {
		t.Fatalf("Neighbourhood communities = %+v, %v", g.Communities, err)
	}
	_, err = s.Neighbourhood(ctx, tenant, "en_missing", 1, 10)
	wantNotFound(t, "Neighbourhood(missing)", err)
}

func testEdges(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1)), ent("C", "x", "", axis(2))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5), rel(1, 2, "R", 0.5), rel(2, 0, "Q", 0.5)},
	})
	ingest(t, s, uniq("t"), "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5)},
	})
	var got []string
	err := s.Edges(ctx, tenant, func(r *store.Relation) error {
		got = append(got, r.ID)
		if r.Tenant != tenant {
			return fmt.Errorf("edge of tenant %q", r.Tenant)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := slices.Clone(o.RelationIDs)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Edges = %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	err = s.Edges(ctx, tenant, func(*store.Relation) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Edges with a failing fn: %v after %d calls, want stop after 1", err, n)
	}
}

func testCommunities(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	_, o := ingest(t, s, tenant, "", store.IngestResult{Entities: []store.ExtractedEntity{
		ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1)), ent("C", "x", "", axis(2)), ent("D", "x", "", axis(3)),
	}})
	c1 := &store.Community{ID: uniq("co_"), Name: "first", MemberIDs: []string{o.EntityIDs[0], o.EntityIDs[1], "en_missing"}}
	c2 := &store.Community{ID: uniq("co_"), MemberIDs: []string{o.EntityIDs[2]}}
	if err := s.ReplaceCommunities(ctx, tenant, []*store.Community{c1, c2}); err != nil {
		t.Fatal(err)
	}
	if e := getEntity(t, s, tenant, o.EntityIDs[0]); e.CommunityID != c1.ID {
		t.Fatalf("BELONGS_TO = %q, want %q", e.CommunityID, c1.ID)
	}
	if e := getEntity(t, s, tenant, o.EntityIDs[3]); e.CommunityID != "" {
		t.Fatalf("a non-member belongs to %q", e.CommunityID)
	}
	cs, err := s.GetCommunities(ctx, tenant, []string{c1.ID, "co_missing"})
	if err != nil || len(cs) != 1 {
		t.Fatalf("GetCommunities = %v, %v", cs, err)
	}
	got := slices.Clone(cs[0].MemberIDs)
	sort.Strings(got)
	want := []string{o.EntityIDs[0], o.EntityIDs[1]}
	sort.Strings(want)
	if cs[0].Name != "first" || cs[0].MemberCount != 2 || !slices.Equal(got, want) || cs[0].UpdatedAt.IsZero() || cs[0].Tenant != tenant {
		t.Fatalf("community = %+v, want members %v", cs[0], want)
	}
	if err := s.SetCommunitySummary(ctx, tenant, c2.ID, "Second", "About C"); err != nil {
		t.Fatal(err)
	}
	err = s.SetCommunitySummary(ctx, tenant, "co_missing", "x", "y")
	wantNotFound(t, "SetCommunitySummary(missing)", err)
	all, err := s.GetCommunities(ctx, tenant, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("GetCommunities(all) = %v, %v", all, err)
	}
	for _, c := range all {
		if c.ID == c2.ID && (c.Name != "Second" || c.Summary != "About C" || c.MemberCount != 1) {
			t.Fatalf("summarised community = %+v", c)
		}
	}
	st, _ := s.Stats(ctx, tenant)
	if st.Communities != 2 || st.CommunitiesUpdatedAt.IsZero() {
		t.Fatalf("stats = %+v", st)
	}
	// Replacing drops the old ones and their memberships.
	c3 := &store.Community{ID: uniq("co_"), MemberIDs: []string{o.EntityIDs[3], o.EntityIDs[0]}}
	if err := s.ReplaceCommunities(ctx, tenant, []*store.Community{c3}); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.GetCommunities(ctx, tenant, []string{c1.ID, c2.ID}); len(cs) != 0 {
		t.Fatalf("replaced communities remain: %v", cs)
	}
	for i, want := range []string{c3.ID, "", "", c3.ID} {
		if e := getEntity(t, s, tenant, o.EntityIDs[i]); e.CommunityID != want {
			t.Fatalf("entity %d belongs to %q, want %q", i, e.CommunityID, want)
		}
	}
	// Deleting a member keeps the count right.
	if _, err := s.DeleteEntity(ctx, tenant, o.EntityIDs[3]); err != nil {
		t.Fatal(err)
	}
	cs, _ = s.GetCommunities(ctx, tenant, []string{c3.ID})
	if len(cs) != 1 || cs[0].MemberCount != 1 || len(cs[0].MemberIDs) != 1 {
		t.Fatalf("after deleting a member: %+v", cs)
	}
	if err := s.ReplaceCommunities(ctx, tenant, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, tenant); st.Communities != 0 {
		t.Fatalf("communities after replacing with none = %d", st.Communities)
	}
	if e := getEntity(t, s, tenant, o.EntityIDs[0]); e.CommunityID != "" {
		t.Fatalf("membership survived its community: %q", e.CommunityID)
	}
}

func testTenantsChanged(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, b := uniq("t"), uniq("t")
	before := time.Now().Add(-time.Minute)
	_, o := ingest(t, s, a, "", store.IngestResult{Entities: []store.ExtractedEntity{ent("A", "x", "", axis(0))}})
	mustCreate(t, s, newEpisode(b, "", "pending only"))
	got, err := s.TenantsChangedSince(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, a) {
		t.Fatalf("TenantsChangedSince = %v, want %s", got, a)
	}
	if slices.Contains(got, b) {
		t.Fatalf("a tenant with only a pending episode changed its graph: %v", got)
	}
	later := time.Now().Add(time.Minute)
	if got, err := s.TenantsChangedSince(ctx, later); err != nil || slices.Contains(got, a) {
		t.Fatalf("TenantsChangedSince(later) = %v, %v", got, err)
	}
	// Community writes are not graph changes; deletes are.
	mark := time.Now()
	if err := s.ReplaceCommunities(ctx, a, []*store.Community{{ID: uniq("co_"), MemberIDs: o.EntityIDs}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.TenantsChangedSince(ctx, mark.Add(time.Millisecond)); slices.Contains(got, a) {
		// allow the CompleteEpisode above to have landed within the same millisecond
		if got2, _ := s.TenantsChangedSince(ctx, time.Now().Add(time.Millisecond)); slices.Contains(got2, a) {
			t.Fatalf("ReplaceCommunities counted as a graph change")
		}
	}
	mark = time.Now().Add(-time.Millisecond)
	if _, err := s.DeleteEntity(ctx, a, o.EntityIDs[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.TenantsChangedSince(ctx, mark); !slices.Contains(got, a) {
		t.Fatalf("DeleteEntity was not a change: %v", got)
	}
}

func testStats(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	st, err := s.Stats(ctx, tenant)
	if err != nil || st != (store.Stats{}) {
		t.Fatalf("Stats(empty) = %+v, %v", st, err)
	}
	ingest(t, s, tenant, "", store.IngestResult{
		Entities:  []store.ExtractedEntity{ent("A", "x", "", axis(0)), ent("B", "x", "", axis(1))},
		Relations: []store.ExtractedRelation{rel(0, 1, "R", 0.5)},
	})
	mustCreate(t, s, newEpisode(tenant, "", "pending"))
	p := mustCreate(t, s, newEpisode(tenant, "", "processing"))
	claim(t, s, "o", tenant, p.ID)
	f := mustCreate(t, s, newEpisode(tenant, "", "failed"))
	claim(t, s, "o", tenant, f.ID)
	if err := s.FailEpisode(ctx, tenant, f.ID, "o", "x", true); err != nil {
		t.Fatal(err)
	}
	st, err = s.Stats(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Stats{Episodes: 4, EpisodesPending: 2, EpisodesFailed: 1, Entities: 2, Relations: 1}
	if st != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
}

func testSettings(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	got, err := s.GetSettings(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	def := store.DefaultSettings()
	if got.CaptureRuns != def.CaptureRuns || got.ToolsEnabled != def.ToolsEnabled || len(got.CaptureDisabledConversations) != 0 {
		t.Fatalf("default settings = %+v", got)
	}
	want := store.Settings{CaptureRuns: false, ToolsEnabled: true, CaptureDisabledConversations: []string{"c1", "c2"}}
	if err := s.PutSettings(ctx, tenant, want); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetSettings(ctx, tenant)
	if err != nil || got.CaptureRuns || !got.ToolsEnabled || !slices.Equal(got.CaptureDisabledConversations, want.CaptureDisabledConversations) {
		t.Fatalf("settings = %+v, %v; want %+v", got, err, want)
	}
	if err := s.PutSettings(ctx, tenant, store.Settings{ToolsEnabled: false, CaptureRuns: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSettings(ctx, tenant)
	if !got.CaptureRuns || got.ToolsEnabled || len(got.CaptureDisabledConversations) != 0 {
		t.Fatalf("overwritten settings = %+v", got)
	}
	if other, _ := s.GetSettings(ctx, uniq("t")); !other.CaptureRuns || !other.ToolsEnabled {
		t.Fatalf("another tenant's settings = %+v", other)
	}
}

// --- isolation -------------------------------------------------------------

func testTenantIsolation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, b := uniq("ta"), uniq("tb")
	epA, o := ingest(t, s, a, "conv-a", store.IngestResult{
		Entities: []store.ExtractedEntity{
			{Name: "Secret Project", Type: "project", Summary: "classified zebra plans", Attributes: map[string]string{"code": "falcon"}, Embedding: axis(0)},
			{Name: "Agent Smith", Type: "person", Summary: "works on zebra", Embedding: axis(1)},
			ent("Third", "x", "", axis(2)),
		},
		Relations: []store.ExtractedRelation{rel(0, 1, "STAFFED_BY", 0.9), rel(1, 2, "R", 0.9)},
	})
	pendA := mustCreate(t, s, newEpisode(a, "conv-a", "pending of A"))
	keyA := newEpisode(a, "", "keyed")
	keyA.IdempotencyKey = "shared-key"
	mustCreate(t, s, keyA)
	co := &store.Community{ID: uniq("co_"), Name: "A's", MemberIDs: o.EntityIDs}
	if err := s.ReplaceCommunities(ctx, a, []*store.Community{co}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSettings(ctx, a, store.Settings{CaptureRuns: false, ToolsEnabled: false}); err != nil {
		t.Fatal(err)
	}
	ent0, ent1 := o.EntityIDs[0], o.EntityIDs[1]
	snapshot := func() store.Stats {
		st, err := s.Stats(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := snapshot()

	// Reads by id.
	_, err := s.GetEpisode(ctx, b, epA.ID)
	wantNotFound(t, "B GetEpisode(A's)", err)
	_, err = s.GetEntity(ctx, b, ent0)
	wantNotFound(t, "B GetEntity(A's)", err)
	if es, err := s.GetEntities(ctx, b, o.EntityIDs); err != nil || len(es) != 0 {
		t.Fatalf("B GetEntities(A's) = %v, %v", es, err)
	}
	_, err = s.FindEntity(ctx, b, "Secret Project", "")
	wantNotFound(t, "B FindEntity(A's name)", err)
	if es, _, err := s.ListEntities(ctx, b, store.EntityFilter{}, store.Page{Size: 100}); err != nil || len(es) != 0 {
		t.Fatalf("B ListEntities = %v, %v", es, err)
	}
	if eps, _, err := s.ListEpisodes(ctx, b, store.EpisodeFilter{ConversationID: "conv-a"}, store.Page{Size: 100}); err != nil || len(eps) != 0 {
		t.Fatalf("B ListEpisodes = %v, %v", eps, err)
	}
	// A's page tokens reveal nothing to B.
	if _, tok, err := s.ListEntities(ctx, a, store.EntityFilter{}, store.Page{Size: 1}); err == nil && tok != "" {
		if es, _, err := s.ListEntities(ctx, b, store.EntityFilter{}, store.Page{Size: 100, Token: tok}); err == nil && len(es) != 0 {
			t.Fatalf("B listed A's entities with A's token: %v", es)
		}
	}
	if rs, err := s.Relations(ctx, b, o.EntityIDs, 100); err != nil || len(rs) != 0 {
		t.Fatalf("B Relations(A's) = %v, %v", rs, err)
	}
	if eps, err := s.EntityEpisodes(ctx, b, ent0, 10); err != nil || len(eps) != 0 {
		t.Fatalf("B EntityEpisodes(A's) = %v, %v", eps, err)
	}
	// Searches.
	if h, err := s.VectorSearch(ctx, b, axis(0), 10, nil); err != nil || len(h) != 0 {
		t.Fatalf("B VectorSearch = %v, %v", h, err)
	}
	for _, q := range []string{"secret project", "zebra", "falcon", "smith"} {
		if h, err := s.KeywordSearch(ctx, b, q, 10, nil); err != nil || len(h) != 0 {
			t.Fatalf("B KeywordSearch(%q) = %v, %v", q, h, err)
		}
	}
	if h, err := s.Traverse(ctx, b, []string{ent0}, 3, 10); err != nil || len(h) != 0 {
		t.Fatalf("B Traverse(A's seeds) = %v, %v", h, err)
	}
	_, err = s.Neighbourhood(ctx, b, ent0, 2, 10)
	wantNotFound(t, "B Neighbourhood(A's)", err)
	n := 0
	if err := s.Edges(ctx, b, func(*store.Relation) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("B Edges = %d, %v", n, err)
	}
	if cs, err := s.GetCommunities(ctx, b, []string{co.ID}); err != nil || len(cs) != 0 {
		t.Fatalf("B GetCommunities(A's) = %v, %v", cs, err)
	}
	if cs, err := s.GetCommunities(ctx, b, nil); err != nil || len(cs) != 0 {
		t.Fatalf("B GetCommunities(all) = %v, %v", cs, err)
	}
	if st, err := s.Stats(ctx, b); err != nil || st != (store.Stats{}) {
		t.Fatalf("B Stats = %+v, %v", st, err)
	}
	if set, err := s.GetSettings(ctx, b); err != nil || !set.CaptureRuns || !set.ToolsEnabled {
		t.Fatalf("B settings = %+v, %v", set, err)
	}

	// Writes and deletes.
	_, err = s.DeleteEpisode(ctx, b, epA.ID)
	wantNotFound(t, "B DeleteEpisode(A's)", err)
	if out, err := s.DeleteConversation(ctx, b, "conv-a"); err != nil || out != (store.DeleteOutcome{}) {
		t.Fatalf("B DeleteConversation(A's conversation) = %+v, %v", out, err)
	}
	_, err = s.DeleteEntity(ctx, b, ent0)
	wantNotFound(t, "B DeleteEntity(A's)", err)
	err = s.SetCommunitySummary(ctx, b, co.ID, "hijacked", "x")
	wantNotFound(t, "B SetCommunitySummary(A's)", err)
	if err := s.FailEpisode(ctx, b, pendA.ID, "o", "x", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("B FailEpisode(A's) = %v, want ErrNotFound", err)
	}
	keyB := newEpisode(b, "", "B keyed")
	keyB.IdempotencyKey = "shared-key"
	if got, created, err := s.CreateEpisode(ctx, keyB); err != nil || !created || got.ID != keyB.ID || got.Tenant != b {
		t.Fatalf("B CreateEpisode with A's key = %+v %v %v", got, created, err)
	}
	// B's episode merging into A's entity fails, and writes nothing.
	epB := mustCreate(t, s, newEpisode(b, "", "B's"))
	claim(t, s, "o", b, epB.ID)
	_, err = s.CompleteEpisode(ctx, b, epB.ID, "o", store.IngestResult{Entities: []store.ExtractedEntity{{MergeInto: ent0, Name: "Hijack", Type: "project", Summary: "overwritten"}}})
	wantNotFound(t, "B CompleteEpisode merging into A's entity", err)
	// Completing A's episode as B.
	claim(t, s, "o", a, pendA.ID)
	_, err = s.CompleteEpisode(ctx, b, pendA.ID, "o", store.IngestResult{})
	wantNotFound(t, "B CompleteEpisode(A's episode)", err)
	// B's communities with A's members claim nothing.
	if err := s.ReplaceCommunities(ctx, b, []*store.Community{{ID: uniq("co_"), MemberIDs: o.EntityIDs}}); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.GetCommunities(ctx, b, nil); len(cs) != 1 || cs[0].MemberCount != 0 {
		t.Fatalf("B's community took A's members: %+v", cs)
	}
	if err := s.PutSettings(ctx, b, store.Settings{CaptureRuns: true, ToolsEnabled: true}); err != nil {
		t.Fatal(err)
	}

	// A is intact.
	after := snapshot()
	if after.Entities != before.Entities || after.Relations != before.Relations || after.Episodes != before.Episodes || after.Communities != before.Communities {
		t.Fatalf("A's stats changed: %+v → %+v", before, after)
	}
	e := getEntity(t, s, a, ent0)
	if e.Summary != "classified zebra plans" || len(e.Aliases) != 0 || e.CommunityID != co.ID || e.MentionCount != 1 {
		t.Fatalf("A's entity changed: %+v", e)
	}
	if e := getEntity(t, s, a, ent1); e.CommunityID != co.ID {
		t.Fatalf("A's membership changed: %q", e.CommunityID)
	}
	cs, _ := s.GetCommunities(ctx, a, []string{co.ID})
	if len(cs) != 1 || cs[0].Name != "A's" || cs[0].MemberCount != 3 {
		t.Fatalf("A's community changed: %+v", cs)
	}
	if set, _ := s.GetSettings(ctx, a); set.CaptureRuns || set.ToolsEnabled {
		t.Fatalf("A's settings changed: %+v", set)
	}
	if g, err := s.GetEpisode(ctx, a, pendA.ID); err != nil || g.Status != store.StatusProcessing {
		t.Fatalf("A's claimed episode: %+v %v", g, err)
	}
	if h, _ := s.KeywordSearch(ctx, a, "zebra", 10, nil); len(h) != 2 {
		t.Fatalf("A's keyword search = %v, want 2", h)
	}
	if h, _ := s.Traverse(ctx, a, []string{ent0}, 2, 10); len(h) != 2 {
		t.Fatalf("A's traverse = %v, want 2", h)
	}
}
