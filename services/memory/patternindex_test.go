package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/postgres"
	"github.com/baagent/baagent/services/memory/store/sqlite"
)

// replicaStores opens two stores over one database, as two memory
// replicas do: one SQLite file opened twice, or one PostgreSQL database.
func replicaStores(t *testing.T, backend string) (store.Store, store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var a, b store.Store
	switch backend {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "memory.db")
		for _, s := range []*store.Store{&a, &b} {
			st, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })
			*s = st
		}
	case "postgres":
		dsn := pgtest.NewDatabase(t)
		for _, s := range []*store.Store{&a, &b} {
			st, err := postgres.Open(ctx, dsn, postgres.Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })
			*s = st
		}
	}
	return a, b
}

// candidateIDs are the ids a match offered.
func candidateIDs(m *baagentv1.MatchPatternsResponse) []string {
	var out []string
	for _, c := range m.GetCandidates() {
		out = append(out, c.GetPattern().GetId())
	}
	return out
}

// A pattern learned, edited, granted, revoked or deleted through the RPCs
// is reflected by the next MatchPatterns, on the replica that did it and
// on another one sharing the store, both of which hold the tenants in
// their index.
func TestPatternIndexFollowsWritesAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sa, sb := replicaStores(t, backend)
			a := newTestServer(t, Options{Store: sa}, false)
			b := newTestServer(t, Options{Store: sb}, false)
			const goal = "Report monthly revenue"
			both := func(what, tenant string, want ...string) []*baagentv1.MatchPatternsResponse {
				t.Helper()
				var out []*baagentv1.MatchPatternsResponse
				for name, ts := range map[string]*testServer{"a": a, "b": b} {
					m := match(t, ts.c, tenant, goal, "")
					if got := candidateIDs(m); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s: replica %s offered %s %v, want %v", what, name, tenant, got, want)
					}
					out = append(out, m)
				}
				return out
			}
			// Both hold the tenants, empty.
			both("before any trace", "acme")
			both("before any grant", "beta")

			id := learn(t, a.c, "acme", goal, 3)
			for _, m := range both("learned through a", "acme", id) {
				if c := m.GetCandidates()[0]; c.GetMode() != "reference" || c.GetPattern().GetUsageCount() != 3 {
					t.Fatalf("candidate %v", c)
				}
			}
			// A fourth trace through b evolves it: both see the new count.
			record(t, b.c, "acme", successTrace("run-evolve-b", goal))
			for _, m := range both("evolved through b", "acme", id) {
				if got := m.GetCandidates()[0].GetPattern().GetUsageCount(); got != 4 {
					t.Fatalf("usage after the fourth trace = %d", got)
				}
			}
			if _, err := b.c.UpdatePattern(t.Context(), &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: id,
				Edit: &baagentv1.PatternEdit{Name: str("Monthly revenue report")}}); err != nil {
				t.Fatal(err)
			}
			for _, m := range both("edited through b", "acme", id) {
				if got := m.GetCandidates()[0].GetPattern().GetName(); got != "Monthly revenue report" {
					t.Fatalf("name after the edit = %q", got)
				}
			}

			if _, err := a.c.GrantPattern(t.Context(), &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"}); err != nil {
				t.Fatal(err)
			}
			for _, m := range both("granted through a", "beta", id) {
				if !m.GetCandidates()[0].GetPattern().GetShared() {
					t.Fatalf("granted candidate not shared: %v", m.GetCandidates()[0])
				}
			}
			if _, err := b.c.RevokePatternGrant(t.Context(), &baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"}); err != nil {
				t.Fatal(err)
			}
			both("revoked through b", "beta")

			if _, err := a.c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "acme", Id: id}); err != nil {
				t.Fatal(err)
			}
			both("deleted through a", "acme")

			for name, ts := range map[string]*testServer{"a": a, "b": b} {
				if v := counterValue(t, ts.reg, "baagent_memory_pattern_index_lookups_total", "result", indexHit); v < 5 {
					t.Errorf("replica %s: %v index hits, want the matches after the first of each tenant", name, v)
				}
				if v := counterValue(t, ts.reg, "baagent_memory_pattern_index_lookups_total", "result", indexReload); v != 2 {
					t.Errorf("replica %s: %v whole reads, want one per tenant", name, v)
				}
			}
		})
	}
}

// plainCounter reads a counter without labels.
func plainCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// putPattern stores p for tenant through the store, as learning does.
func putPattern(t *testing.T, st store.Store, tenant string, p patterns.Pattern) {
	t.Helper()
	p.Tenant = tenant
	rec := &store.PatternRecord{Pattern: p}
	if _, err := st.LearnTrace(t.Context(), &store.TraceRecord{Tenant: tenant, RunID: "put-" + p.ID,
		Trace: patterns.Trace{RunID: "put-" + p.ID, UserGoal: "put", Success: true}}, "put", "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return rec, true, nil }); err != nil {
		t.Fatal(err)
	}
}

// reportPattern is an active report pattern, updated at updated.
func reportPattern(name string, entityTypes []string, updated time.Time) patterns.Pattern {
	return patterns.Pattern{
		ID: newID(patternPrefix, updated), Name: name,
		Signature:  patterns.NewSignature(patterns.TaskReport, entityTypes),
		Steps:      []patterns.Step{{Description: "Query the warehouse", Tools: []string{"sql_query"}}},
		UsageCount: 5, SuccessCount: 5, SuccessRate: 1,
		CreatedAt: updated.Add(-time.Hour), UpdatedAt: updated, LastUsedAt: updated, LastQueriedAt: updated,
	}
}

// A winner deleted through another replica is dropped from the index and
// the next candidate offered instead.
func TestPatternIndexDropsDeletedWinners(t *testing.T) {
	t.Parallel()
	sa, sb := replicaStores(t, "sqlite")
	a := newTestServer(t, Options{Store: sa}, false)
	b := newTestServer(t, Options{Store: sb}, false)
	now := time.Now().UTC()
	best := reportPattern("best", nil, now)
	next := reportPattern("next", nil, now.Add(-time.Minute)) // same score, older
	putPattern(t, sa, "acme", best)
	putPattern(t, sa, "acme", next)
	const goal = "Report monthly revenue"
	if got := candidateIDs(match(t, a.c, "acme", goal, "")); fmt.Sprint(got) != fmt.Sprint([]string{best.ID, next.ID}) {
		t.Fatalf("first match %v, want [%s %s]", got, best.ID, next.ID)
	}
	// Deleted behind the index's back (the store of b, no RPC of a).
	if _, err := b.c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "acme", Id: best.ID}); err != nil {
		t.Fatal(err)
	}
	if got := candidateIDs(match(t, a.c, "acme", goal, "")); fmt.Sprint(got) != fmt.Sprint([]string{next.ID}) {
		t.Fatalf("match after the delete %v, want [%s]", got, next.ID)
	}
	if tenants, heads := a.srv.patternIndex.stats(); tenants != 1 || heads != 1 {
		t.Fatalf("index holds %d tenants, %d heads; want the deleted one dropped", tenants, heads)
	}
}

// Tenants beyond the cap are evicted least recently matched first and
// read whole again when matched; a tenant with more patterns than the
// index holds is matched from the store.
func TestPatternIndexEvictionUnderCap(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ts := newTestServer(t, Options{Store: st, PatternIndex: PatternIndexOptions{MaxHeads: 4}}, false)
	now := time.Now().UTC()
	ids := map[string]string{}
	for _, tenant := range []string{"t1", "t2", "t3"} {
		p := reportPattern(tenant+" report", nil, now)
		putPattern(t, st, tenant, p)
		ids[tenant] = p.ID
	}
	const goal = "Report monthly revenue"
	check := func(tenant string) {
		t.Helper()
		if got := candidateIDs(match(t, ts.c, tenant, goal, "")); len(got) != 1 || got[0] != ids[tenant] {
			t.Fatalf("%s offered %v, want [%s]", tenant, got, ids[tenant])
		}
		if tenants, heads := ts.srv.patternIndex.stats(); heads+tenants > 4 {
			t.Fatalf("index holds %d tenants and %d heads, over the cap of 4", tenants, heads)
		}
	}
	check("t1")
	check("t2")
	check("t1") // t2 is now the least recently matched
	check("t3")
	if ts.srv.patternIndex.lookup("t2") != nil || ts.srv.patternIndex.lookup("t1") == nil || ts.srv.patternIndex.lookup("t3") == nil {
		t.Fatal("t2, the least recently matched, was not the one evicted")
	}
	if v := plainCounter(t, ts.reg, "baagent_memory_pattern_index_evictions_total"); v != 1 {
		t.Fatalf("%v evictions, want 1", v)
	}
	check("t2")
	if v := counterValue(t, ts.reg, "baagent_memory_pattern_index_lookups_total", "result", indexReload); v != 4 {
		t.Fatalf("%v whole reads, want 4 (t1, t2, t3, t2 again)", v)
	}

	// Four patterns: more than the index holds.
	for i := range 3 {
		putPattern(t, st, "big", reportPattern(fmt.Sprintf("big %d", i), nil, now.Add(-time.Duration(i+1)*time.Minute)))
	}
	top := reportPattern("big best", nil, now)
	putPattern(t, st, "big", top)
	for range 2 {
		if got := candidateIDs(match(t, ts.c, "big", goal, "")); len(got) != 3 || got[0] != top.ID {
			t.Fatalf("big tenant offered %v, want 3 led by %s", got, top.ID)
		}
	}
	if v := counterValue(t, ts.reg, "baagent_memory_pattern_index_lookups_total", "result", indexBypass); v != 2 {
		t.Fatalf("%v bypasses, want 2", v)
	}
	if tenants, heads := ts.srv.patternIndex.stats(); heads+tenants > 4 {
		t.Fatalf("index holds %d tenants and %d heads, over the cap", tenants, heads)
	}
}

// Concurrent matches of one tenant, while traces, edits and grants land,
// all answer and offer the pattern; the index ends with every change.
func TestPatternIndexConcurrentMatches(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	const goal = "Report monthly revenue"
	id := learn(t, ts.c, "acme", goal, 3)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				m, err := ts.c.MatchPatterns(ctx, &baagentv1.MatchPatternsRequest{Tenant: "acme", Goal: goal})
				if err != nil {
					errs <- err
					return
				}
				if got := candidateIDs(m); len(got) != 1 || got[0] != id {
					errs <- fmt.Errorf("worker %d match %d offered %v, want [%s]", w, i, got, id)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 5 {
			if _, err := ts.c.RecordTrace(ctx, &baagentv1.RecordTraceRequest{Tenant: "acme",
				Trace: successTrace(fmt.Sprintf("run-concurrent-%d", i), goal)}); err != nil {
				errs <- err
				return
			}
			if _, err := ts.c.UpdatePattern(ctx, &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: id,
				Edit: &baagentv1.PatternEdit{Name: str(fmt.Sprintf("name %d", i))}}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := match(t, ts.c, "acme", goal, "")
	if p := m.GetCandidates()[0].GetPattern(); p.GetUsageCount() != 8 || p.GetName() != "name 4" {
		t.Fatalf("after the writes: usage %d name %q, want 8 and %q", p.GetUsageCount(), p.GetName(), "name 4")
	}
}

// The index's candidates are the store's: the same patterns, in the same
// order, with the same scoring fields, own and granted, within the limit.
func TestPatternIndexCandidatesAreTheStores(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	populatePatterns(t, st, "eq", 300)
	populatePatterns(t, st, "other", 40)
	granted, err := st.PatternHeads(t.Context(), "other", time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range granted[:10] {
		if _, err := st.GrantPattern(t.Context(), store.PatternGrant{Owner: "other", PatternID: g.ID, Grantee: "eq"}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	x := newPatternIndex(PatternIndexOptions{}, st, m, time.Now)
	sharedSeen := false
	for _, q := range []struct {
		task  string
		names []string
		limit int
	}{
		{patterns.TaskReport, nil, 2000},
		{patterns.TaskTrend, []string{strings.ToLower(benchEntityName(3)), strings.ToLower(benchEntityName(4))}, 2000},
		{patterns.TaskLookup, []string{strings.ToUpper(benchEntityName(5))}, 2000},
		{"no-such-task", []string{strings.ToLower(benchEntityName(7))}, 2000},
		{patterns.TaskRanking, []string{strings.ToLower(benchEntityName(8))}, 7},
	} {
		want, err := st.PatternCandidates(t.Context(), "eq", q.task, q.names, q.limit)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := x.candidates(t.Context(), "eq", q.task, q.names, q.limit)
		if err != nil || !ok {
			t.Fatalf("index candidates: %v, %v", ok, err)
		}
		if len(got) != len(want) || (q.task != "no-such-task" && len(want) == 0) {
			t.Fatalf("%s %v: index %d candidates, store %d", q.task, q.names, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s %v: candidate %d: index %+v, store %+v", q.task, q.names, i, got[i], want[i])
			}
			sharedSeen = sharedSeen || got[i].Tenant == "other"
		}
	}
	if !sharedSeen {
		t.Fatal("no granted pattern among the candidates compared")
	}
}

// The background reload reads a held tenant whole again once its last
// whole read is older than FullReload, dropping a pattern deleted behind
// the index's back that never won (so no match removed it), without a
// match paying for the read.
func TestPatternIndexReloadDueDropsStaleHeads(t *testing.T) {
	t.Parallel()
	sa, sb := replicaStores(t, "sqlite")
	a := newTestServer(t, Options{Store: sa, PatternIndex: PatternIndexOptions{FullReload: time.Hour}}, false)
	b := newTestServer(t, Options{Store: sb}, false)
	now := time.Now().UTC()
	kept := reportPattern("kept", nil, now)
	putPattern(t, sa, "acme", kept)
	loser := reportPattern("loser", nil, now)
	loser.Signature.TaskType = patterns.TaskTrend // never a candidate of a report goal
	putPattern(t, sa, "acme", loser)
	match(t, a.c, "acme", "Report monthly revenue", "")
	if _, heads := a.srv.patternIndex.stats(); heads != 2 {
		t.Fatalf("index holds %d heads, want 2", heads)
	}
	if _, err := b.c.DeletePattern(t.Context(), &baagentv1.DeletePatternRequest{Tenant: "acme", Id: loser.ID}); err != nil {
		t.Fatal(err)
	}
	// Not due yet: nothing read.
	if n, err := a.srv.patternIndex.reloadDue(t.Context()); err != nil || n != 0 {
		t.Fatalf("reloadDue before FullReload: %d, %v; want 0", n, err)
	}
	// Due: the tenant's last whole read is made older than FullReload.
	tenant := a.srv.patternIndex.lookup("acme")
	tenant.mu.Lock()
	tenant.fullAt = tenant.fullAt.Add(-2 * time.Hour)
	tenant.mu.Unlock()
	if n, err := a.srv.patternIndex.reloadDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("reloadDue after FullReload: %d, %v; want 1", n, err)
	}
	if _, heads := a.srv.patternIndex.stats(); heads != 1 {
		t.Fatalf("index holds %d heads after the reload, want the deleted one dropped", heads)
	}
	// A cancelled reload stops at once.
	tenant.mu.Lock()
	tenant.fullAt = tenant.fullAt.Add(-2 * time.Hour)
	tenant.mu.Unlock()
	tenant.load <- struct{}{} // a match is reading
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.srv.patternIndex.reloadDue(ctx); err == nil {
		t.Fatal("reloadDue with a cancelled context and a busy tenant returned no error")
	}
	<-tenant.load
}
