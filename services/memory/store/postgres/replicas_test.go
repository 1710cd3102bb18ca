package postgres

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/vecindex"
)

// TestConcurrentClaimersAcrossPools has two replicas (two pools on one
// database), each with several claimers, drain a queue: every episode is
// leased exactly once.
func TestConcurrentClaimersAcrossPools(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := testCtx(t)
	const n = 120
	for i := range n {
		addEpisode(t, a, fmt.Sprintf("tenant-%d", i%3), "")
	}
	var (
		mu     sync.Mutex
		owners = map[string]string{}
		wg     sync.WaitGroup
		errs   = make(chan error, 8)
	)
	for w := range 8 {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("replica-%d", w)
			for {
				eps, err := s.ClaimEpisodes(ctx, owner, 5, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if len(eps) == 0 {
					return
				}
				mu.Lock()
				for _, e := range eps {
					key := e.Tenant + "/" + e.ID
					if prev, dup := owners[key]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("episode %s leased to %s and %s", key, prev, owner)
						return
					}
					owners[key] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(owners) != n {
		t.Fatalf("%d of %d episodes claimed", len(owners), n)
	}
	// Each replica completes what it holds; the other cannot.
	for key, owner := range owners {
		var tenant, id string
		for i := range key {
			if key[i] == '/' {
				tenant, id = key[:i], key[i+1:]
				break
			}
		}
		other := "replica-x"
		if _, err := b.CompleteEpisode(ctx, tenant, id, other, store.IngestResult{}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("completion by a replica without the lease: %v", err)
		}
		if _, err := a.CompleteEpisode(ctx, tenant, id, owner, store.IngestResult{}); err != nil {
			t.Fatalf("completion by the owner: %v", err)
		}
		break
	}
}

// TestConcurrentCompletionSameNewEntity completes, from two replicas at
// once, many episodes that all name the same new entity: one entity
// results, mentioned by every episode, created exactly once.
func TestConcurrentCompletionSameNewEntity(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := testCtx(t)
	const n = 24
	for range n {
		addEpisode(t, a, "acme", "")
	}
	eps, err := a.ClaimEpisodes(ctx, "w", n, time.Minute)
	if err != nil || len(eps) != n {
		t.Fatalf("claim: %d, %v", len(eps), err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []string
		errs    = make(chan error, n)
	)
	for i, ep := range eps {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := s.CompleteEpisode(ctx, "acme", ep.ID, "w", store.IngestResult{
				Entities: []store.ExtractedEntity{
					{Name: "Zephyr Project", Type: "project", Summary: fmt.Sprintf("seen in %s", ep.ID), Embedding: unit(1, 1, 0)},
					{Name: fmt.Sprintf("Person %d", i), Type: "person"},
				},
				Relations: []store.ExtractedRelation{{Source: 1, Target: 0, Type: "works_on", Confidence: 0.5}},
			})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			created = append(created, out.CreatedIDs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	z, err := a.FindEntity(ctx, "acme", "zephyr project", "project")
	if err != nil {
		t.Fatal(err)
	}
	if z.MentionCount != n {
		t.Fatalf("mention count %d, want %d", z.MentionCount, n)
	}
	zCreated := 0
	for _, id := range created {
		if id == z.ID {
			zCreated++
		}
	}
	if zCreated != 1 || len(created) != n+1 {
		t.Fatalf("the shared entity was created %d times; %d creations in all, want %d", zCreated, len(created), n+1)
	}
	st, err := b.Stats(ctx, "acme")
	if err != nil || st.Entities != n+1 || st.Relations != n || st.EpisodesPending != 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

// TestMigrateConcurrently opens four stores on a fresh database at once:
// the advisory lock lets each migration run exactly once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := newDSN(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	stores := make(chan *Store, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, dsn, Options{})
			if err != nil {
				errs <- err
				return
			}
			stores <- s
		}()
	}
	wg.Wait()
	close(errs)
	close(stores)
	for s := range stores {
		t.Cleanup(func() { _ = s.Close() })
	}
	for err := range errs {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	var rows, maxV int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*), max(version) FROM memory_schema_version`).Scan(&rows, &maxV); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() || maxV != SchemaVersion() {
		t.Fatalf("schema versions recorded: %d rows, max %d; want %d", rows, maxV, SchemaVersion())
	}
	// Migrating again changes nothing.
	if err := Migrate(ctx, s.Pool()); err != nil {
		t.Fatal(err)
	}
}

// TestTenantFirstInEveryIndex checks the schema: every index of the
// memory tables starts with the tenant column, but for the two
// cross-tenant ones documented in schema.go.
func TestTenantFirstInEveryIndex(t *testing.T) {
	s, _ := openTest(t)
	ctx := testCtx(t)
	rows, err := s.Pool().Query(ctx, `
SELECT i.relname, a.attname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class c ON c.oid = x.indrelid
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]
WHERE c.relname LIKE 'memory\_%' AND c.relname <> 'memory_schema_version'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var index string
		var first *string
		if err := rows.Scan(&index, &first); err != nil {
			t.Fatal(err)
		}
		seen++
		if index == "memory_episodes_claim" || index == "memory_pattern_traces_created" {
			continue // the cross-tenant claim queue and trace pruning
		}
		if index == "memory_patterns_entities" {
			continue // its keys start with the tenant
		}
		if index == "memory_entities_alias_keys" {
			continue // its keys start with the tenant (memory_tenant_keys)
		}
		if strings.HasPrefix(index, "memory_pattern_grants_") {
			// Grants are keyed by tenants: the owner or the grantee.
			if first == nil || (*first != "owner" && *first != "grantee") {
				t.Errorf("index %s does not start with owner or grantee", index)
			}
			continue
		}
		if first == nil || *first != "tenant" {
			t.Errorf("index %s does not start with tenant", index)
		}
	}
	if seen < 15 {
		t.Fatalf("only %d indexes inspected", seen)
	}
}

// TestTenantCrossing tries to reach another tenant's rows with tenant
// strings that would be trouble if spliced into SQL, and with another
// tenant's ids through every kind of call.
func TestTenantCrossing(t *testing.T) {
	s, _ := openTest(t)
	ctx := testCtx(t)
	ep := addEpisode(t, s, "victim", "conv")
	out := ingest(t, s, ep, store.IngestResult{
		Entities:  []store.ExtractedEntity{{Name: "Secret", Type: "doc", Summary: "classified plans", Embedding: unit(1, 0)}, {Name: "Vault", Type: "place", Embedding: unit(0, 1)}},
		Relations: []store.ExtractedRelation{{Source: 0, Target: 1, Type: "kept_in", Confidence: 0.9}},
	})
	for _, tenant := range []string{"attacker", "victim' OR '1'='1", "%", "victim\x00", "VICTIM", " victim"} {
		if hits, err := s.KeywordSearch(ctx, tenant, "secret classified", 10, nil); len(hits) != 0 {
			t.Fatalf("%q keyword search: %v %v", tenant, hits, err)
		}
		if hits, err := s.VectorSearch(ctx, tenant, unit(1, 0), 10, nil); len(hits) != 0 {
			t.Fatalf("%q vector search: %v %v", tenant, hits, err)
		}
		if hits, err := s.Traverse(ctx, tenant, out.EntityIDs, 2, 10); len(hits) != 0 {
			t.Fatalf("%q traverse: %v %v", tenant, hits, err)
		}
		if rels, err := s.Relations(ctx, tenant, out.EntityIDs, 10); len(rels) != 0 {
			t.Fatalf("%q relations: %v %v", tenant, rels, err)
		}
		if es, err := s.GetEntities(ctx, tenant, out.EntityIDs); len(es) != 0 {
			t.Fatalf("%q entities: %v %v", tenant, es, err)
		}
		if _, err := s.GetEpisode(ctx, tenant, ep.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%q episode: %v", tenant, err)
		}
		if _, err := s.DeleteEpisode(ctx, tenant, ep.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%q delete episode: %v", tenant, err)
		}
		if d, err := s.DeleteConversation(ctx, tenant, "conv"); err != nil || d != (store.DeleteOutcome{}) {
			t.Fatalf("%q delete conversation: %+v %v", tenant, d, err)
		}
	}
	st, err := s.Stats(ctx, "victim")
	if err != nil || st.Episodes != 1 || st.Entities != 2 || st.Relations != 1 {
		t.Fatalf("victim's memory after the attempts: %+v %v", st, err)
	}
}

// TestVectorIndexFollowsOtherReplica searches on one replica while another
// writes and deletes: the in-process index catches up through the tenant's
// change sequence.
func TestVectorIndexFollowsOtherReplica(t *testing.T) {
	writer, dsn := openTest(t)
	reg := prometheus.NewRegistry()
	reader, err := Open(testCtx(t), dsn, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Close() })
	ctx := testCtx(t)
	if hits, err := reader.VectorSearch(ctx, "acme", unit(1, 0, 0), 5, nil); err != nil || len(hits) != 0 {
		t.Fatalf("empty tenant: %v %v", hits, err)
	}
	o1 := ingest(t, writer, addEpisode(t, writer, "acme", ""), store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "East", Type: "place", Embedding: unit(1, 0, 0)},
		{Name: "North", Type: "place", Embedding: unit(0, 1, 0)},
	}})
	hits, err := reader.VectorSearch(ctx, "acme", unit(1, 0.1, 0), 5, nil)
	if err != nil || len(hits) != 2 || hits[0].ID != o1.EntityIDs[0] || hits[0].Score < 0.99 {
		t.Fatalf("after the first write: %+v %v", hits, err)
	}
	o2 := ingest(t, writer, addEpisode(t, writer, "acme", ""), store.IngestResult{Entities: []store.ExtractedEntity{
		{Name: "Up", Type: "direction", Embedding: unit(0, 0, 1)},
	}})
	hits, err = reader.VectorSearch(ctx, "acme", unit(0, 0, 1), 1, nil)
	if err != nil || len(hits) != 1 || hits[0].ID != o2.EntityIDs[0] {
		t.Fatalf("after the second write: %+v %v", hits, err)
	}
	if hits, _ := reader.VectorSearch(ctx, "acme", unit(0, 0, 1), 5, []string{"place"}); len(hits) != 2 {
		t.Fatalf("type filter: %+v", hits)
	}
	if _, err := writer.DeleteEntity(ctx, "acme", o1.EntityIDs[0]); err != nil {
		t.Fatal(err)
	}
	hits, err = reader.VectorSearch(ctx, "acme", unit(1, 0, 0), 5, nil)
	if err != nil || len(hits) != 2 {
		t.Fatalf("after the delete: %+v %v", hits, err)
	}
	for _, h := range hits {
		if h.ID == o1.EntityIDs[0] {
			t.Fatalf("deleted entity still found: %+v", hits)
		}
	}
	// A vector of another length matches nothing; a zero vector neither.
	if hits, err := reader.VectorSearch(ctx, "acme", []float32{1, 0}, 5, nil); err != nil || len(hits) != 0 {
		t.Fatalf("other length: %+v %v", hits, err)
	}
	if hits, err := reader.VectorSearch(ctx, "acme", []float32{0, 0, 0}, 5, nil); err != nil || len(hits) != 0 {
		t.Fatalf("zero vector: %+v %v", hits, err)
	}
	// Full load, then deltas: the two first vectors, the third, the
	// removal — each read once.
	if got := testutil.ToFloat64(reader.metrics.vectorsLoaded); got != 4 {
		t.Fatalf("vectors and removals read = %v, want 4 (incremental catch-up)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "baagent_memory_postgres_vector_catchup_seconds"); err != nil || n != 1 {
		t.Fatalf("catch-up histogram: %d %v", n, err)
	}
}

// TestVectorCacheBounded keeps at most the configured tenant count of
// indexes in memory, reloading an evicted one when searched again.
func TestVectorCacheBounded(t *testing.T) {
	_, dsn := openTest(t)
	ctx := testCtx(t)
	s, err := Open(ctx, dsn, Options{Vectors: vecindex.Options{MaxTenants: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for i := range 4 {
		tenant := fmt.Sprintf("t%d", i)
		ingest(t, s, addEpisode(t, s, tenant, ""), store.IngestResult{Entities: []store.ExtractedEntity{{Name: "X", Type: "x", Embedding: unit(1, float32(i))}}})
		if hits, err := s.VectorSearch(ctx, tenant, unit(1, 0), 3, nil); err != nil || len(hits) != 1 {
			t.Fatalf("%s: %v %v", tenant, hits, err)
		}
	}
	if n := s.vectors.Stats().Tenants; n != 2 {
		t.Fatalf("%d tenant indexes cached, want 2", n)
	}
	if hits, err := s.VectorSearch(ctx, "t0", unit(1, 0), 3, nil); err != nil || len(hits) != 1 {
		t.Fatalf("evicted tenant: %v %v", hits, err)
	}
}

// newDSN is a fresh database nothing has opened yet.
func newDSN(t *testing.T) string {
	t.Helper()
	return pgtest.NewDatabase(t)
}

// TestTombstonesPruned keeps a tenant's tombstones bounded: a replica whose
// index is older than the oldest kept one reloads the tenant and still
// answers right.
func TestTombstonesPruned(t *testing.T) {
	old := maxTombstones
	maxTombstones = 2
	t.Cleanup(func() { maxTombstones = old })
	writer, dsn := openTest(t)
	reader := openDSN(t, dsn)
	ctx := testCtx(t)
	var es []store.ExtractedEntity
	for i := range 6 {
		v := make([]float32, 6)
		v[i] = 1
		es = append(es, store.ExtractedEntity{Name: fmt.Sprintf("E%d", i), Type: "x", Embedding: v})
	}
	out := ingest(t, writer, addEpisode(t, writer, "acme", ""), store.IngestResult{Entities: es})
	if hits, err := reader.VectorSearch(ctx, "acme", es[0].Embedding, 10, nil); err != nil || len(hits) != 6 {
		t.Fatalf("before: %v %v", hits, err)
	}
	for _, id := range out.EntityIDs[:4] {
		if _, err := writer.DeleteEntity(ctx, "acme", id); err != nil {
			t.Fatal(err)
		}
	}
	var tombs int
	var floor int64
	if err := writer.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM memory_entity_tombstones WHERE tenant = 'acme'),
		(SELECT tomb_floor FROM memory_tenants WHERE tenant = 'acme')`).Scan(&tombs, &floor); err != nil {
		t.Fatal(err)
	}
	if tombs != 2 || floor == 0 {
		t.Fatalf("%d tombstones kept, floor %d; want 2 and a raised floor", tombs, floor)
	}
	hits, err := reader.VectorSearch(ctx, "acme", es[0].Embedding, 10, nil)
	if err != nil || len(hits) != 2 {
		t.Fatalf("after pruning: %v %v", hits, err)
	}
	for _, h := range hits {
		if h.ID != out.EntityIDs[4] && h.ID != out.EntityIDs[5] {
			t.Fatalf("deleted entity %s found", h.ID)
		}
	}
}

// TestConcurrentGraphWritersDoNotDeadlock runs completions merging into a
// set of entities alongside community rebuilds and entity deletes of the
// same tenant: every write takes the tenant row before entity rows, so
// none fails with a deadlock.
func TestConcurrentGraphWritersDoNotDeadlock(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := testCtx(t)
	const n = 30
	var names []store.ExtractedEntity
	for i := range 8 {
		names = append(names, store.ExtractedEntity{Name: fmt.Sprintf("Shared %d", i), Type: "x", Embedding: unit(1, float32(i))})
	}
	base := ingest(t, a, addEpisode(t, a, "acme", ""), store.IngestResult{Entities: names})
	for range n {
		addEpisode(t, a, "acme", "")
	}
	eps, err := a.ClaimEpisodes(ctx, "w", n, time.Minute)
	if err != nil || len(eps) != n {
		t.Fatalf("claim: %d %v", len(eps), err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var es []store.ExtractedEntity
			for j := range 4 { // merges in varying order
				k := (i + j*3) % len(base.EntityIDs)
				es = append(es, store.ExtractedEntity{MergeInto: base.EntityIDs[k], Name: names[k].Name, Type: "x", Summary: fmt.Sprintf("v%d", i)})
			}
			if _, err := a.CompleteEpisode(ctx, "acme", ep.ID, "w", store.IngestResult{Entities: es}); err != nil && !errors.Is(err, store.ErrNotFound) {
				errs <- fmt.Errorf("complete: %w", err)
			}
		}()
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members := []string{base.EntityIDs[(i+5)%8], base.EntityIDs[i%8], base.EntityIDs[(i+2)%8]}
			if err := b.ReplaceCommunities(ctx, "acme", []*store.Community{{MemberIDs: members}}); err != nil {
				errs <- fmt.Errorf("communities: %w", err)
			}
		}()
	}
	for _, id := range base.EntityIDs[6:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.DeleteEntity(ctx, "acme", id); err != nil {
				errs <- fmt.Errorf("delete: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, err := a.Stats(ctx, "acme")
	if err != nil || st.Entities != 6 || st.Communities != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}
