package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// The pattern part of the suite pins down, beyond PatternStore's doc
// comments:
//
//   - LearnTrace with learn returning nil records the trace with an empty
//     PatternID; the candidates are ordered by id.
//   - PatternCandidates, ListPatterns and GetPatterns mark a granted
//     pattern by its Tenant (the owner). A grant to the owner itself is an
//     error.
//   - ListPatterns orders by UpdatedAt, then ID, then owner, all
//     descending; ListPatternGrants by CreatedAt descending.
//   - Times read back equal to the microsecond.

// patternTests are run by Run.
var patternTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"PatternLearnOnce", testPatternLearnOnce},
	{"PatternLearnCandidates", testPatternLearnCandidates},
	{"PatternLearnRollback", testPatternLearnRollback},
	{"PatternLearnConcurrent", testPatternLearnConcurrent},
	{"PatternCandidates", testPatternCandidates},
	{"PatternTouch", testPatternTouch},
	{"PatternReads", testPatternReads},
	{"PatternList", testPatternList},
	{"PatternUpdate", testPatternUpdate},
	{"PatternDelete", testPatternDelete},
	{"PatternSuppressions", testPatternSuppressions},
	{"PatternGrants", testPatternGrants},
	{"PatternTraces", testPatternTraces},
	{"PatternDeleteConversation", testPatternDeleteConversation},
	{"PatternSettings", testPatternSettings},
	{"PatternRoundTrip", testPatternRoundTrip},
	{"PatternTenantIsolation", testPatternTenantIsolation},
}

// baseTime is a time at the stores' common precision.
func baseTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

var patternSeq sync.Mutex

// newPatternID is a pattern id unique within the process.
func newPatternID() string {
	patternSeq.Lock()
	defer patternSeq.Unlock()
	return uniq("pt_")
}

// simplePattern is an active-looking pattern of a task type.
func simplePattern(taskType string, entities []string, updated time.Time) *patterns.Pattern {
	return &patterns.Pattern{
		ID:           newPatternID(),
		Name:         taskType + " pattern",
		Signature:    patterns.Signature{TaskType: taskType, EntityTypes: []string{"metric"}},
		Entities:     entities,
		Steps:        []patterns.Step{{Description: "query the data", Tools: []string{"sql"}}},
		ToolChains:   [][]string{{"sql", "chart"}},
		UsageCount:   3,
		SuccessCount: 3,
		SuccessRate:  1,
		CreatedAt:    updated.Add(-time.Hour),
		UpdatedAt:    updated,
		LastUsedAt:   updated,
	}
}

// createPattern stores p for tenant through LearnTrace (the only way in).
func createPattern(t *testing.T, s store.Store, tenant string, p *patterns.Pattern) *store.PatternRecord {
	t.Helper()
	tr := &store.TraceRecord{Tenant: tenant, RunID: uniq("run"), ConversationID: "conv-seed",
		Trace: patterns.Trace{UserGoal: "seed", Success: true}}
	out, err := s.LearnTrace(ctxT(t), tr, p.Signature.TaskType, "", func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
		return &store.PatternRecord{Pattern: *p}, true, nil
	})
	if err != nil || !out.Created || out.PatternID != p.ID {
		t.Fatalf("LearnTrace(create %s) = %+v, %v", p.ID, out, err)
	}
	rec, err := s.GetPattern(ctxT(t), tenant, p.ID)
	if err != nil {
		t.Fatalf("GetPattern(%s): %v", p.ID, err)
	}
	return rec
}

func recordIDs(rs []*store.PatternRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func sortedIDs(rs []*store.PatternRecord) []string {
	out := recordIDs(rs)
	slices.Sort(out)
	return out
}

func sorted(xs ...string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func testPatternLearnOnce(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	now := baseTime()
	p := simplePattern(patterns.TaskReport, []string{"sales"}, now)
	tr := &store.TraceRecord{Tenant: tenant, RunID: "run-1", ConversationID: "c1", CreatedAt: now,
		Trace: patterns.Trace{RunID: "run-1", UserGoal: "report of sales", Success: true}}
	calls := 0
	create := func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
		calls++
		if len(cands) != 0 {
			t.Errorf("first learn got %d candidates", len(cands))
		}
		return &store.PatternRecord{Pattern: *p}, true, nil
	}
	out, err := s.LearnTrace(ctx, tr, patterns.TaskReport, "", create)
	if err != nil || !out.Created || out.Duplicate || out.PatternID != p.ID || calls != 1 {
		t.Fatalf("LearnTrace = %+v, %v (calls %d)", out, err, calls)
	}
	got, err := s.GetPattern(ctx, tenant, p.ID)
	if err != nil || got.Version != 1 || got.Tenant != tenant {
		t.Fatalf("created pattern = %+v, %v; want version 1 of %s", got, err, tenant)
	}
	// The same run again: Duplicate, learn not called, nothing changed.
	out, err = s.LearnTrace(ctx, tr, patterns.TaskReport, "", create)
	if err != nil || !out.Duplicate || out.Created || out.PatternID != p.ID || calls != 1 {
		t.Fatalf("LearnTrace(again) = %+v, %v (calls %d)", out, err, calls)
	}
	// Another run evolves it: Version 2.
	tr2 := &store.TraceRecord{Tenant: tenant, RunID: "run-2", ConversationID: "c1", CreatedAt: now,
		Trace: patterns.Trace{RunID: "run-2", UserGoal: "report of sales", Success: true}}
	out, err = s.LearnTrace(ctx, tr2, patterns.TaskReport, "", func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
		if len(cands) != 1 || cands[0].ID != p.ID || cands[0].Version != 1 {
			return nil, false, fmt.Errorf("candidates = %v", recordIDs(cands))
		}
		cands[0].UsageCount++
		return cands[0], false, nil
	})
	if err != nil || out.Created || out.Duplicate || out.PatternID != p.ID {
		t.Fatalf("LearnTrace(evolve) = %+v, %v", out, err)
	}
	got, err = s.GetPattern(ctx, tenant, p.ID)
	if err != nil || got.Version != 2 || got.UsageCount != p.UsageCount+1 {
		t.Fatalf("evolved pattern = version %d usage %d, %v; want 2, %d", got.Version, got.UsageCount, err, p.UsageCount+1)
	}
	// Learn deciding nothing still records the trace.
	tr3 := &store.TraceRecord{Tenant: tenant, RunID: "run-3", ConversationID: "c1", CreatedAt: now,
		Trace: patterns.Trace{RunID: "run-3", UserGoal: "report of sales"}}
	out, err = s.LearnTrace(ctx, tr3, patterns.TaskReport, "", func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
		return nil, false, nil
	})
	if err != nil || out.PatternID != "" || out.Created || out.Duplicate {
		t.Fatalf("LearnTrace(nothing) = %+v, %v", out, err)
	}
	if rec, err := s.GetTrace(ctx, tenant, "run-3"); err != nil || rec.PatternID != "" {
		t.Fatalf("GetTrace(run-3) = %+v, %v", rec, err)
	}
	if rec, err := s.GetTrace(ctx, tenant, "run-1"); err != nil || rec.PatternID != p.ID {
		t.Fatalf("GetTrace(run-1) = %+v, %v", rec, err)
	}
	if got, _ := s.GetPattern(ctx, tenant, p.ID); got.Version != 2 {
		t.Fatalf("version after a trace that changed nothing = %d", got.Version)
	}
	// The run id is per tenant.
	other := uniq("t")
	out, err = s.LearnTrace(ctx, &store.TraceRecord{Tenant: other, RunID: "run-1", CreatedAt: now}, patterns.TaskReport, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil })
	if err != nil || out.Duplicate {
		t.Fatalf("another tenant's run-1 = %+v, %v", out, err)
	}
}

func testPatternLearnCandidates(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	r1 := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	r2 := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"b"}, now.Add(time.Second)))
	tr := createPattern(t, s, tenant, simplePattern(patterns.TaskTrend, []string{"a"}, now))
	rk := createPattern(t, s, tenant, simplePattern(patterns.TaskRanking, []string{"a"}, now))
	o1 := createPattern(t, s, other, simplePattern(patterns.TaskReport, []string{"a"}, now))
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: o1.ID, Grantee: tenant}); err != nil {
		t.Fatal(err)
	}
	learnWith := func(used string) []*store.PatternRecord {
		t.Helper()
		var got []*store.PatternRecord
		_, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: uniq("run"), CreatedAt: now}, patterns.TaskReport, used,
			func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
				got = cands
				return nil, false, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := learnWith("")
	if want := sorted(r1.ID, r2.ID); !slices.Equal(recordIDs(got), want) {
		t.Fatalf("candidates = %v, want %v (by id)", recordIDs(got), want)
	}
	for _, c := range got {
		if c.Tenant != tenant || len(c.Steps) != 1 || len(c.ToolChains) != 1 || c.Version != 1 {
			t.Fatalf("candidate is not whole: %+v", c)
		}
	}
	if got := learnWith(tr.ID); !slices.Equal(recordIDs(got), sorted(r1.ID, r2.ID, tr.ID)) {
		t.Fatalf("candidates with the used trend pattern = %v", recordIDs(got))
	}
	// Another tenant's pattern (even granted) is never a learning candidate.
	if got := learnWith(o1.ID); !slices.Equal(recordIDs(got), sorted(r1.ID, r2.ID)) {
		t.Fatalf("candidates with another tenant's used pattern = %v", recordIDs(got))
	}
	if got := learnWith(rk.ID); !slices.Equal(recordIDs(got), sorted(r1.ID, r2.ID, rk.ID)) {
		t.Fatalf("candidates with the used ranking pattern = %v", recordIDs(got))
	}
}

func testPatternLearnRollback(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	now := baseTime()
	rec := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	boom := errors.New("boom")
	_, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: "run-x", CreatedAt: now}, patterns.TaskReport, "",
		func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
			cands[0].UsageCount = 99
			return cands[0], false, boom
		})
	if !errors.Is(err, boom) {
		t.Fatalf("LearnTrace with a failing learn = %v, want boom", err)
	}
	_, err = s.GetTrace(ctx, tenant, "run-x")
	wantNotFound(t, "trace of a rolled-back learn", err)
	got, err := s.GetPattern(ctx, tenant, rec.ID)
	if err != nil || got.Version != 1 || got.UsageCount != rec.UsageCount {
		t.Fatalf("pattern after a rolled-back learn = %+v, %v", got, err)
	}
	// A created pattern that fails is not stored either.
	fresh := simplePattern(patterns.TaskTrend, nil, now)
	_, err = s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: "run-y", CreatedAt: now}, patterns.TaskTrend, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
			return &store.PatternRecord{Pattern: *fresh}, true, boom
		})
	if !errors.Is(err, boom) {
		t.Fatalf("LearnTrace = %v, want boom", err)
	}
	_, err = s.GetPattern(ctx, tenant, fresh.ID)
	wantNotFound(t, "pattern of a rolled-back learn", err)
	// The run can be learned after the failure.
	out, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: "run-x", CreatedAt: now}, patterns.TaskReport, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil })
	if err != nil || out.Duplicate {
		t.Fatalf("LearnTrace after the rollback = %+v, %v", out, err)
	}
}

func testPatternLearnConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	now := baseTime()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trace := patterns.Trace{RunID: fmt.Sprintf("run-%d", i), UserGoal: "monthly sales report", Success: true,
				EntityTypes: []string{"metric"}, Entities: []string{"sales"},
				ToolCalls: []patterns.ToolCall{{Tool: "sql", Success: true}}, DurationMs: 1000}
			sig := patterns.NewSignature(trace.UserGoal, trace.EntityTypes)
			_, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: trace.RunID, CreatedAt: now, Trace: trace}, sig.TaskType, "",
				func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
					ps := make([]*patterns.Pattern, len(cands))
					for i, c := range cands {
						ps[i] = &c.Pattern
					}
					changed, created := patterns.Learn(&trace, ps, now, func() *patterns.Pattern {
						return &patterns.Pattern{ID: newPatternID(), Tenant: tenant}
					})
					if changed == nil {
						return nil, false, nil
					}
					for _, c := range cands {
						if &c.Pattern == changed {
							return c, false, nil
						}
					}
					return &store.PatternRecord{Pattern: *changed}, created, nil
				})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.ListPatterns(ctx, tenant, store.PatternFilter{}, store.Page{Size: 50})
	if err != nil || len(got) != 1 {
		t.Fatalf("patterns after %d concurrent learns = %v, %v; want one", n, recordIDs(got), err)
	}
	if got[0].UsageCount != n || got[0].SuccessCount != n || got[0].Version != n {
		t.Fatalf("pattern = usage %d, successes %d, version %d; want %d each", got[0].UsageCount, got[0].SuccessCount, got[0].Version, n)
	}
}

func testPatternCandidates(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other, third := uniq("t"), uniq("t"), uniq("t")
	now := baseTime()
	at := func(i int) time.Time { return now.Add(time.Duration(i) * time.Minute) }
	ownReport := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"alpha", "beta"}, at(1)))
	ownTrendC := createPattern(t, s, tenant, simplePattern(patterns.TaskTrend, []string{"gamma"}, at(2)))
	ownTrendX := createPattern(t, s, tenant, simplePattern(patterns.TaskTrend, []string{"xray"}, at(3)))
	grReport := createPattern(t, s, other, simplePattern(patterns.TaskReport, []string{"zulu"}, at(4)))
	grTrendC := createPattern(t, s, other, simplePattern(patterns.TaskTrend, []string{"gamma", "delta"}, at(5)))
	grTrendX := createPattern(t, s, other, simplePattern(patterns.TaskTrend, []string{"xray"}, at(6)))
	notGranted := createPattern(t, s, other, simplePattern(patterns.TaskReport, []string{"gamma"}, at(7)))
	thirdReport := createPattern(t, s, third, simplePattern(patterns.TaskReport, []string{"gamma"}, at(8)))
	for _, id := range []string{grReport.ID, grTrendC.ID, grTrendX.ID} {
		if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: id, Grantee: tenant}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.PatternCandidates(ctx, tenant, patterns.TaskReport, []string{"Gamma", "omega"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{grTrendC.ID, grReport.ID, ownTrendC.ID, ownReport.ID} // newest first
	if !slices.Equal(recordIDs(got), want) {
		t.Fatalf("candidates = %v, want %v (not %v %v %v %v)", recordIDs(got), want, ownTrendX.ID, grTrendX.ID, notGranted.ID, thirdReport.ID)
	}
	for _, c := range got {
		wantOwner := tenant
		if c.ID == grTrendC.ID || c.ID == grReport.ID {
			wantOwner = other
		}
		if c.Tenant != wantOwner {
			t.Fatalf("candidate %s Tenant = %q, want %q", c.ID, c.Tenant, wantOwner)
		}
		if c.Version != 1 || c.Name == "" || c.Signature.TaskType == "" || len(c.Signature.EntityTypes) != 1 ||
			len(c.Entities) == 0 || c.UsageCount != 3 || c.SuccessCount != 3 || c.SuccessRate != 1 ||
			c.UpdatedAt.IsZero() || c.CreatedAt.IsZero() || c.LastUsedAt.IsZero() {
			t.Fatalf("candidate lacks scoring fields: %+v", c)
		}
	}
	if !sameTime(got[0].UpdatedAt, at(5)) {
		t.Fatalf("candidate UpdatedAt = %v, want %v", got[0].UpdatedAt, at(5))
	}
	got, err = s.PatternCandidates(ctx, tenant, patterns.TaskReport, []string{"gamma"}, 2)
	if err != nil || !slices.Equal(recordIDs(got), want[:2]) {
		t.Fatalf("candidates(limit 2) = %v, %v; want %v", recordIDs(got), err, want[:2])
	}
	// Without entities: the task type alone.
	got, err = s.PatternCandidates(ctx, tenant, patterns.TaskTrend, nil, 100)
	if err != nil || !slices.Equal(recordIDs(got), []string{grTrendX.ID, grTrendC.ID, ownTrendX.ID, ownTrendC.ID}) {
		t.Fatalf("trend candidates = %v, %v", recordIDs(got), err)
	}
	// Nothing qualifies.
	got, err = s.PatternCandidates(ctx, tenant, patterns.TaskLookup, []string{"nothing"}, 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("lookup candidates = %v, %v", recordIDs(got), err)
	}
	got, err = s.PatternCandidates(ctx, uniq("t"), patterns.TaskReport, []string{"gamma"}, 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("a stranger's candidates = %v, %v", recordIDs(got), err)
	}
}

func testPatternTouch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	own := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	theirs := createPattern(t, s, other, simplePattern(patterns.TaskReport, []string{"a"}, now))
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: theirs.ID, Grantee: tenant}); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Hour)
	if err := s.TouchPatterns(ctx, tenant, []string{own.ID, theirs.ID, "pt_missing"}, at); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPattern(ctx, tenant, own.ID)
	if err != nil || !sameTime(got.LastQueriedAt, at) || got.Version != 1 {
		t.Fatalf("touched pattern = queried %v version %d, %v; want %v, 1", got.LastQueriedAt, got.Version, err, at)
	}
	cands, err := s.PatternCandidates(ctx, tenant, patterns.TaskReport, nil, 10)
	if err != nil || len(cands) != 2 {
		t.Fatalf("candidates = %v, %v", recordIDs(cands), err)
	}
	for _, c := range cands {
		if c.ID == own.ID && !sameTime(c.LastQueriedAt, at) {
			t.Fatalf("candidate LastQueriedAt = %v, want %v", c.LastQueriedAt, at)
		}
		if c.ID == theirs.ID && !c.LastQueriedAt.IsZero() {
			t.Fatalf("the granted pattern was touched: %v", c.LastQueriedAt)
		}
	}
	got, err = s.GetPattern(ctx, other, theirs.ID)
	if err != nil || !got.LastQueriedAt.IsZero() || got.Version != 1 {
		t.Fatalf("another tenant's pattern after a touch = %+v, %v", got, err)
	}
	if err := s.TouchPatterns(ctx, tenant, nil, at); err != nil {
		t.Fatalf("TouchPatterns(none) = %v", err)
	}
	// An edit after a touch keeps the touch.
	upd, err := s.UpdatePattern(ctx, tenant, own.ID, 0, func(p *patterns.Pattern) error { p.Name = "renamed"; return nil })
	if err != nil || !sameTime(upd.LastQueriedAt, at) {
		t.Fatalf("UpdatePattern after a touch = %+v, %v", upd, err)
	}
	if got, _ := s.GetPattern(ctx, tenant, own.ID); !sameTime(got.LastQueriedAt, at) || got.Name != "renamed" {
		t.Fatalf("pattern after touch+edit = %+v", got)
	}
}

func testPatternReads(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	own := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	granted := createPattern(t, s, other, simplePattern(patterns.TaskTrend, []string{"b"}, now))
	hidden := createPattern(t, s, other, simplePattern(patterns.TaskTrend, []string{"c"}, now))
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: granted.ID, Grantee: tenant}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPattern(ctx, tenant, granted.ID); err != nil || got.Tenant != other || len(got.Steps) != 1 {
		t.Fatalf("GetPattern(granted) = %+v, %v", got, err)
	}
	_, err := s.GetPattern(ctx, tenant, hidden.ID)
	wantNotFound(t, "GetPattern(another tenant's)", err)
	_, err = s.GetPattern(ctx, tenant, "pt_missing")
	wantNotFound(t, "GetPattern(missing)", err)
	got, err := s.GetPatterns(ctx, tenant, []string{hidden.ID, granted.ID, "pt_missing", own.ID})
	if err != nil || !slices.Equal(sortedIDs(got), sorted(granted.ID, own.ID)) {
		t.Fatalf("GetPatterns = %v, %v", recordIDs(got), err)
	}
	for _, r := range got {
		if (r.ID == own.ID) != (r.Tenant == tenant) || len(r.Steps) != 1 {
			t.Fatalf("GetPatterns record = %+v", r)
		}
	}
	if got, err := s.GetPatterns(ctx, tenant, nil); err != nil || len(got) != 0 {
		t.Fatalf("GetPatterns(none) = %v, %v", recordIDs(got), err)
	}
}

func testPatternList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	var own []*store.PatternRecord
	for i := range 5 {
		typ := patterns.TaskReport
		if i%2 == 1 {
			typ = patterns.TaskTrend
		}
		own = append(own, createPattern(t, s, tenant, simplePattern(typ, nil, now.Add(time.Duration(i)*time.Minute))))
	}
	// Two with one update time: the larger id first.
	tie := []*store.PatternRecord{
		createPattern(t, s, tenant, simplePattern(patterns.TaskReport, nil, now.Add(10*time.Minute))),
		createPattern(t, s, tenant, simplePattern(patterns.TaskReport, nil, now.Add(10*time.Minute))),
	}
	slices.SortFunc(tie, func(a, b *store.PatternRecord) int { return -cmpString(a.ID, b.ID) })
	shared := createPattern(t, s, other, simplePattern(patterns.TaskReport, nil, now.Add(5*time.Minute)))
	createPattern(t, s, other, simplePattern(patterns.TaskReport, nil, now.Add(6*time.Minute)))
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: shared.ID, Grantee: tenant}); err != nil {
		t.Fatal(err)
	}
	all := []string{tie[0].ID, tie[1].ID, own[4].ID, own[3].ID, own[2].ID, own[1].ID, own[0].ID}
	var walked []string
	tok := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		got, next, err := s.ListPatterns(ctx, tenant, store.PatternFilter{}, store.Page{Size: 2, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 2 {
			t.Fatalf("page of %d", len(got))
		}
		walked = append(walked, recordIDs(got)...)
		if next == "" {
			break
		}
		tok = next
	}
	if !slices.Equal(walked, all) {
		t.Fatalf("ListPatterns pages = %v, want %v", walked, all)
	}
	got, _, err := s.ListPatterns(ctx, tenant, store.PatternFilter{TaskType: patterns.TaskTrend}, store.Page{})
	if err != nil || !slices.Equal(recordIDs(got), []string{own[3].ID, own[1].ID}) {
		t.Fatalf("ListPatterns(trend) = %v, %v", recordIDs(got), err)
	}
	got, _, err = s.ListPatterns(ctx, tenant, store.PatternFilter{IncludeShared: true}, store.Page{Size: 500})
	withShared := []string{tie[0].ID, tie[1].ID, shared.ID, own[4].ID, own[3].ID, own[2].ID, own[1].ID, own[0].ID}
	if err != nil || !slices.Equal(recordIDs(got), withShared) {
		t.Fatalf("ListPatterns(shared) = %v, %v; want %v", recordIDs(got), err, withShared)
	}
	if got[2].Tenant != other || got[0].Tenant != tenant {
		t.Fatalf("owners = %q, %q", got[2].Tenant, got[0].Tenant)
	}
	// Paging with shared ones too.
	walked, tok = nil, ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		got, next, err := s.ListPatterns(ctx, tenant, store.PatternFilter{IncludeShared: true}, store.Page{Size: 3, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, recordIDs(got)...)
		if next == "" {
			break
		}
		tok = next
	}
	if !slices.Equal(walked, withShared) {
		t.Fatalf("ListPatterns(shared) pages = %v, want %v", walked, withShared)
	}
	got, _, err = s.ListPatterns(ctx, tenant, store.PatternFilter{TaskType: patterns.TaskReport, IncludeShared: true}, store.Page{})
	if err != nil || len(got) != 6 {
		t.Fatalf("ListPatterns(report, shared) = %v, %v", recordIDs(got), err)
	}
	if _, _, err := s.ListPatterns(ctx, tenant, store.PatternFilter{}, store.Page{Token: "%%%not-a-token"}); err == nil {
		t.Fatal("a malformed page token was accepted")
	}
	if got, next, err := s.ListPatterns(ctx, uniq("t"), store.PatternFilter{IncludeShared: true}, store.Page{}); err != nil || len(got) != 0 || next != "" {
		t.Fatalf("a stranger's list = %v, %q, %v", recordIDs(got), next, err)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testPatternUpdate(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	rec := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	called := false
	_, err := s.UpdatePattern(ctx, tenant, rec.ID, 7, func(*patterns.Pattern) error { called = true; return nil })
	if !errors.Is(err, store.ErrConflict) || called {
		t.Fatalf("UpdatePattern(stale version) = %v (edit called %v), want ErrConflict without the edit", err, called)
	}
	edited := now.Add(time.Minute)
	got, err := s.UpdatePattern(ctx, tenant, rec.ID, 1, func(p *patterns.Pattern) error {
		p.Name = "Monthly report"
		p.Description = "how we do it"
		p.Steps = append(p.Steps, patterns.Step{Description: "chart it", Tools: []string{"chart"}})
		p.Entities = []string{"omega"}
		p.UpdatedAt = edited
		return nil
	})
	if err != nil || got.Version != 2 || got.Name != "Monthly report" || got.Tenant != tenant || got.ID != rec.ID {
		t.Fatalf("UpdatePattern = %+v, %v", got, err)
	}
	read, err := s.GetPattern(ctx, tenant, rec.ID)
	if err != nil || read.Version != 2 || read.Description != "how we do it" || len(read.Steps) != 2 || !sameTime(read.UpdatedAt, edited) {
		t.Fatalf("edited pattern = %+v, %v", read, err)
	}
	// Candidates follow the edited entities.
	if c, err := s.PatternCandidates(ctx, tenant, patterns.TaskLookup, []string{"omega"}, 10); err != nil || !slices.Equal(recordIDs(c), []string{rec.ID}) {
		t.Fatalf("candidates by the new entity = %v, %v", recordIDs(c), err)
	}
	if c, err := s.PatternCandidates(ctx, tenant, patterns.TaskLookup, []string{"a"}, 10); err != nil || len(c) != 0 {
		t.Fatalf("candidates by the old entity = %v, %v", recordIDs(c), err)
	}
	// Version 0: no check.
	if got, err := s.UpdatePattern(ctx, tenant, rec.ID, 0, func(p *patterns.Pattern) error { p.Name = "x"; return nil }); err != nil || got.Version != 3 {
		t.Fatalf("UpdatePattern(any version) = %+v, %v", got, err)
	}
	// The edit's error rolls back.
	boom := errors.New("boom")
	_, err = s.UpdatePattern(ctx, tenant, rec.ID, 3, func(p *patterns.Pattern) error { p.Name = "lost"; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("UpdatePattern(failing edit) = %v, want boom", err)
	}
	if got, _ := s.GetPattern(ctx, tenant, rec.ID); got.Name != "x" || got.Version != 3 {
		t.Fatalf("pattern after a failed edit = %q v%d", got.Name, got.Version)
	}
	// Another tenant's, even granted: NotFound.
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: tenant, PatternID: rec.ID, Grantee: other}); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdatePattern(ctx, other, rec.ID, 0, func(*patterns.Pattern) error { called = true; return nil })
	wantNotFound(t, "UpdatePattern(granted)", err)
	_, err = s.UpdatePattern(ctx, tenant, "pt_missing", 0, func(*patterns.Pattern) error { called = true; return nil })
	wantNotFound(t, "UpdatePattern(missing)", err)
	if called {
		t.Fatal("edit called for a pattern the tenant does not own")
	}
}

func testPatternDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	rec := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	keep := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"a"}, now))
	for _, id := range []string{rec.ID, keep.ID} {
		if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: tenant, PatternID: id, Grantee: other}); err != nil {
			t.Fatal(err)
		}
	}
	wantNotFound(t, "DeletePattern(granted, by the grantee)", s.DeletePattern(ctx, other, rec.ID))
	if err := s.DeletePattern(ctx, tenant, rec.ID); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, "DeletePattern(again)", s.DeletePattern(ctx, tenant, rec.ID))
	_, err := s.GetPattern(ctx, tenant, rec.ID)
	wantNotFound(t, "GetPattern(deleted)", err)
	_, err = s.GetPattern(ctx, other, rec.ID)
	wantNotFound(t, "GetPattern(deleted, by the grantee)", err)
	if c, err := s.PatternCandidates(ctx, other, patterns.TaskReport, []string{"a"}, 10); err != nil || !slices.Equal(recordIDs(c), []string{keep.ID}) {
		t.Fatalf("grantee's candidates after the delete = %v, %v", recordIDs(c), err)
	}
	if c, err := s.PatternCandidates(ctx, tenant, patterns.TaskLookup, []string{"a"}, 10); err != nil || !slices.Equal(recordIDs(c), []string{keep.ID}) {
		t.Fatalf("owner's candidates after the delete = %v, %v", recordIDs(c), err)
	}
	gs, err := s.ListPatternGrants(ctx, tenant, "", 10)
	if err != nil || len(gs) != 1 || gs[0].PatternID != keep.ID {
		t.Fatalf("grants after the delete = %+v, %v", gs, err)
	}
}

func testPatternSuppressions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	now := baseTime()
	sigA := patterns.Signature{TaskType: patterns.TaskReport, EntityTypes: []string{"metric", "region"}}
	sigB := patterns.Signature{TaskType: patterns.TaskTrend}
	if err := s.SuppressSignature(ctx, tenant, sigA, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.SuppressSignature(ctx, tenant, sigB, now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.SuppressedSignatures(ctx, tenant, now)
	if err != nil || len(got) != 2 {
		t.Fatalf("SuppressedSignatures = %+v, %v", got, err)
	}
	slices.SortFunc(got, func(a, b patterns.Signature) int { return cmpString(a.TaskType, b.TaskType) })
	if !reflect.DeepEqual(got[0], sigA) || got[1].TaskType != sigB.TaskType || len(got[1].EntityTypes) != 0 {
		t.Fatalf("SuppressedSignatures = %+v", got)
	}
	if got, _ := s.SuppressedSignatures(ctx, tenant, now.Add(90*time.Minute)); len(got) != 1 || got[0].TaskType != sigB.TaskType {
		t.Fatalf("SuppressedSignatures later = %+v", got)
	}
	// A later call replaces: shortened to the past.
	if err := s.SuppressSignature(ctx, tenant, sigB, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SuppressedSignatures(ctx, tenant, now); len(got) != 1 || !reflect.DeepEqual(got[0], sigA) {
		t.Fatalf("SuppressedSignatures after the replacement = %+v", got)
	}
	if got, err := s.SuppressedSignatures(ctx, uniq("t"), now); err != nil || len(got) != 0 {
		t.Fatalf("a stranger's suppressions = %+v, %v", got, err)
	}
}

func testPatternGrants(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	owner, g1, g2 := uniq("t"), uniq("t"), uniq("t")
	now := baseTime()
	p1 := createPattern(t, s, owner, simplePattern(patterns.TaskReport, nil, now))
	p2 := createPattern(t, s, owner, simplePattern(patterns.TaskReport, nil, now))
	first, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p1.ID, Grantee: g1, CreatedAt: now})
	if err != nil || first.Owner != owner || first.PatternID != p1.ID || first.Grantee != g1 || !sameTime(first.CreatedAt, now) {
		t.Fatalf("GrantPattern = %+v, %v", first, err)
	}
	again, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p1.ID, Grantee: g1, CreatedAt: now.Add(time.Hour)})
	if err != nil || !sameTime(again.CreatedAt, now) {
		t.Fatalf("GrantPattern(again) = %+v, %v; want the first grant", again, err)
	}
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p1.ID, Grantee: g2, CreatedAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p2.ID, Grantee: g1, CreatedAt: now.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Granting another's pattern (the grantee's view of it included).
	_, err = s.GrantPattern(ctx, store.PatternGrant{Owner: g1, PatternID: p1.ID, Grantee: g2})
	wantNotFound(t, "GrantPattern(another tenant's)", err)
	_, err = s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: "pt_missing", Grantee: g2})
	wantNotFound(t, "GrantPattern(missing)", err)
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p1.ID, Grantee: owner}); err == nil {
		t.Fatal("a grant to the owner was accepted")
	}
	gs, err := s.ListPatternGrants(ctx, owner, "", 10)
	if err != nil || len(gs) != 3 || gs[0].PatternID != p2.ID || gs[1].Grantee != g2 || gs[2].Grantee != g1 {
		t.Fatalf("ListPatternGrants = %+v, %v; want newest first", gs, err)
	}
	if gs, err := s.ListPatternGrants(ctx, owner, "", 1); err != nil || len(gs) != 1 || gs[0].PatternID != p2.ID {
		t.Fatalf("ListPatternGrants(limit 1) = %+v, %v", gs, err)
	}
	gs, err = s.ListPatternGrants(ctx, owner, p1.ID, 10)
	if err != nil || len(gs) != 2 || gs[0].Grantee != g2 || gs[1].Grantee != g1 || gs[0].Owner != owner {
		t.Fatalf("ListPatternGrants(p1) = %+v, %v", gs, err)
	}
	if gs, err := s.ListPatternGrants(ctx, g1, "", 10); err != nil || len(gs) != 0 {
		t.Fatalf("the grantee's own grants = %+v, %v", gs, err)
	}
	if err := s.RevokePatternGrant(ctx, owner, p1.ID, g1); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, "RevokePatternGrant(again)", s.RevokePatternGrant(ctx, owner, p1.ID, g1))
	wantNotFound(t, "RevokePatternGrant(by the grantee)", s.RevokePatternGrant(ctx, g2, p1.ID, g2))
	_, err = s.GetPattern(ctx, g1, p1.ID)
	wantNotFound(t, "GetPattern(revoked)", err)
	if got, err := s.GetPattern(ctx, g2, p1.ID); err != nil || got.Tenant != owner {
		t.Fatalf("GetPattern(still granted) = %+v, %v", got, err)
	}
	if got, err := s.GetPattern(ctx, g1, p2.ID); err != nil || got.ID != p2.ID {
		t.Fatalf("GetPattern(other grant) = %+v, %v", got, err)
	}
}

func testPatternTraces(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	learnNothing := func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil }
	trace := patterns.Trace{ConversationID: "c1", RunID: "run-old", UserGoal: "top customers by revenue",
		Clarifications: []patterns.ClarificationQA{{Question: "which year?", Answer: "2025"}},
		Decisions:      []patterns.Decision{{Question: "include returns?", Options: []string{"yes", "no"}, Recommended: "no", UserChoice: "yes", Impact: "high"}},
		PlanSteps:      []patterns.PlanStep{{Description: "query", Tools: []string{"sql"}, ExpectedOutput: "rows", Done: true}},
		ToolCalls:      []patterns.ToolCall{{Tool: "sql", Success: true, PlanStep: 1}},
		Corrections:    []patterns.Correction{{PlanStep: 1, AgentError: "wrong table", HumanFix: "use orders", Tools: []string{"sql"}}},
		FinalResult:    "done", Success: true, DurationMs: 1234, HumanInterventions: 2,
		EntityTypes: []string{"metric"}, Entities: []string{"revenue"}}
	for i, tr := range []*store.TraceRecord{
		{Tenant: tenant, RunID: "run-old", ConversationID: "c1", CreatedAt: now.Add(-48 * time.Hour), Trace: trace},
		{Tenant: tenant, RunID: "run-new", ConversationID: "c1", CreatedAt: now},
		{Tenant: other, RunID: "run-other-old", ConversationID: "c1", CreatedAt: now.Add(-72 * time.Hour)},
	} {
		if _, err := s.LearnTrace(ctx, tr, patterns.TaskRanking, "", learnNothing); err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
	}
	got, err := s.GetTrace(ctx, tenant, "run-old")
	if err != nil || got.Tenant != tenant || got.RunID != "run-old" || got.ConversationID != "c1" || !sameTime(got.CreatedAt, now.Add(-48*time.Hour)) {
		t.Fatalf("GetTrace = %+v, %v", got, err)
	}
	if !reflect.DeepEqual(got.Trace, trace) {
		t.Fatalf("trace round trip:\n got %+v\nwant %+v", got.Trace, trace)
	}
	_, err = s.GetTrace(ctx, other, "run-old")
	wantNotFound(t, "GetTrace(another tenant's)", err)
	n, err := s.PruneTraces(ctx, now.Add(-24*time.Hour))
	if err != nil || n < 2 {
		t.Fatalf("PruneTraces = %d, %v; want at least the 2 old traces", n, err)
	}
	_, err = s.GetTrace(ctx, tenant, "run-old")
	wantNotFound(t, "GetTrace(pruned)", err)
	_, err = s.GetTrace(ctx, other, "run-other-old")
	wantNotFound(t, "GetTrace(pruned, other tenant)", err)
	if _, err := s.GetTrace(ctx, tenant, "run-new"); err != nil {
		t.Fatalf("GetTrace(kept) = %v", err)
	}
	// A pruned run may be learned again (the window is the caller's).
	out, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: "run-old", CreatedAt: now}, patterns.TaskRanking, "", learnNothing)
	if err != nil || out.Duplicate {
		t.Fatalf("LearnTrace(pruned run) = %+v, %v", out, err)
	}
}

func testPatternDeleteConversation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	learnNothing := func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil }
	for _, tr := range []*store.TraceRecord{
		{Tenant: tenant, RunID: "r1", ConversationID: "conv-a", CreatedAt: now},
		{Tenant: tenant, RunID: "r2", ConversationID: "conv-a", CreatedAt: now},
		{Tenant: tenant, RunID: "r3", ConversationID: "conv-b", CreatedAt: now},
		{Tenant: other, RunID: "r4", ConversationID: "conv-a", CreatedAt: now},
	} {
		if _, err := s.LearnTrace(ctx, tr, patterns.TaskLookup, "", learnNothing); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, s, newEpisode(tenant, "conv-a", "an episode"))
	out, err := s.DeleteConversation(ctx, tenant, "conv-a")
	if err != nil || out.Traces != 2 || out.Episodes != 1 {
		t.Fatalf("DeleteConversation = %+v, %v; want 2 traces and 1 episode", out, err)
	}
	for _, run := range []string{"r1", "r2"} {
		_, err := s.GetTrace(ctx, tenant, run)
		wantNotFound(t, "GetTrace(deleted conversation)", err)
	}
	if _, err := s.GetTrace(ctx, tenant, "r3"); err != nil {
		t.Fatalf("other conversation's trace: %v", err)
	}
	if _, err := s.GetTrace(ctx, other, "r4"); err != nil {
		t.Fatalf("other tenant's trace: %v", err)
	}
	// Traces without episodes.
	out, err = s.DeleteConversation(ctx, tenant, "conv-b")
	if err != nil || out.Traces != 1 || out.Episodes != 0 {
		t.Fatalf("DeleteConversation(traces only) = %+v, %v", out, err)
	}
}

func testPatternSettings(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	got, err := s.GetSettings(ctx, tenant)
	if err != nil || !got.PatternsEnabled || len(got.PatternsDisabledConversations) != 0 {
		t.Fatalf("default settings = %+v, %v", got, err)
	}
	want := store.Settings{CaptureRuns: true, ToolsEnabled: true, PatternsEnabled: false, PatternsDisabledConversations: []string{"c1", "c2"}}
	if err := s.PutSettings(ctx, tenant, want); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetSettings(ctx, tenant)
	if err != nil || got.PatternsEnabled || !slices.Equal(got.PatternsDisabledConversations, want.PatternsDisabledConversations) ||
		!got.CaptureRuns || !got.ToolsEnabled {
		t.Fatalf("settings = %+v, %v; want %+v", got, err, want)
	}
	if err := s.PutSettings(ctx, tenant, store.Settings{PatternsEnabled: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSettings(ctx, tenant)
	if !got.PatternsEnabled || len(got.PatternsDisabledConversations) != 0 || got.CaptureRuns {
		t.Fatalf("overwritten settings = %+v", got)
	}
}

// fullPattern sets every field of a pattern.
func fullPattern(tenant string, now time.Time) *patterns.Pattern {
	return &patterns.Pattern{
		ID:          newPatternID(),
		Tenant:      tenant,
		Name:        "breakdown of region, metric — 区域",
		Description: "revenue by region\nwith \"quotes\" and \\ backslashes",
		Signature:   patterns.Signature{TaskType: patterns.TaskBreakdown, EntityTypes: []string{"metric", "region"}},
		Entities:    []string{"revenue", "emea", "华东"},
		Steps: []patterns.Step{
			{Description: "query revenue", Tools: []string{"sql"}, ExpectedOutput: "a table", Corrections: []string{"use net revenue"}},
			{Description: "chart it", Tools: []string{"chart", "export"}},
		},
		ToolChains: [][]string{{"sql", "chart", "export"}, {"sql", "chart"}},
		Decisions: []patterns.DecisionPreference{
			{Question: "include returns?", Recommended: "no", Choices: map[string]int{"no": 3, "yes": 1}},
			{Question: "currency?", Recommended: "EUR", Choices: map[string]int{"EUR": 2}},
		},
		SuccessFactors: patterns.SuccessFactors{
			ClarificationsNeeded: 2,
			CriticalDecisions:    []string{"include returns?"},
			CommonCorrections:    []string{"use net revenue", "exclude tests"},
		},
		UsageCount:          7,
		SuccessCount:        5,
		FailureCount:        2,
		ConsecutiveFailures: 1,
		SuccessRate:         5.0 / 7.0,
		AvgDurationMs:       98765,
		CreatedAt:           now.Add(-240 * time.Hour),
		UpdatedAt:           now.Add(-time.Hour),
		LastQueriedAt:       now.Add(-30 * time.Minute),
		LastUsedAt:          now.Add(-2 * time.Hour),
	}
}

// comparePatterns compares every field, the times with Equal.
func comparePatterns(t *testing.T, what string, got, want *patterns.Pattern) {
	t.Helper()
	times := func(p *patterns.Pattern) [4]time.Time {
		return [4]time.Time{p.CreatedAt, p.UpdatedAt, p.LastQueriedAt, p.LastUsedAt}
	}
	gt, wt := times(got), times(want)
	for i := range gt {
		if !sameTime(gt[i], wt[i]) {
			t.Fatalf("%s: time %d = %v, want %v", what, i, gt[i], wt[i])
		}
	}
	g, w := *got, *want
	g.CreatedAt, g.UpdatedAt, g.LastQueriedAt, g.LastUsedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	w.CreatedAt, w.UpdatedAt, w.LastQueriedAt, w.LastUsedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func testPatternRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant := uniq("t")
	now := time.Now().UTC()                   // full precision: the store keeps at least microseconds
	want := fullPattern("ignored-owner", now) // the store sets the owner
	rec := createPattern(t, s, tenant, want)
	want.Tenant = tenant
	comparePatterns(t, "GetPattern", &rec.Pattern, want)
	if rec.Version != 1 {
		t.Fatalf("version = %d", rec.Version)
	}
	got, err := s.GetPatterns(ctx, tenant, []string{want.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("GetPatterns = %v, %v", recordIDs(got), err)
	}
	comparePatterns(t, "GetPatterns", &got[0].Pattern, want)
	list, _, err := s.ListPatterns(ctx, tenant, store.PatternFilter{}, store.Page{})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListPatterns = %v, %v", recordIDs(list), err)
	}
	comparePatterns(t, "ListPatterns", &list[0].Pattern, want)
	// Candidates: the scoring fields.
	cands, err := s.PatternCandidates(ctx, tenant, patterns.TaskBreakdown, nil, 10)
	if err != nil || len(cands) != 1 {
		t.Fatalf("PatternCandidates = %v, %v", recordIDs(cands), err)
	}
	c := cands[0]
	if c.ID != want.ID || c.Tenant != tenant || c.Name != want.Name || !reflect.DeepEqual(c.Signature, want.Signature) ||
		!slices.Equal(c.Entities, want.Entities) || c.UsageCount != want.UsageCount || c.SuccessCount != want.SuccessCount ||
		c.FailureCount != want.FailureCount || c.ConsecutiveFailures != want.ConsecutiveFailures ||
		c.SuccessRate != want.SuccessRate || c.Version != 1 {
		t.Fatalf("candidate = %+v\nwant %+v", c, want)
	}
	for i, pair := range [][2]time.Time{{c.CreatedAt, want.CreatedAt}, {c.UpdatedAt, want.UpdatedAt}, {c.LastQueriedAt, want.LastQueriedAt}, {c.LastUsedAt, want.LastUsedAt}} {
		if !sameTime(pair[0], pair[1]) {
			t.Fatalf("candidate time %d = %v, want %v", i, pair[0], pair[1])
		}
	}
	// An edit that changes nothing keeps every field.
	upd, err := s.UpdatePattern(ctx, tenant, want.ID, 1, func(*patterns.Pattern) error { return nil })
	if err != nil || upd.Version != 2 {
		t.Fatalf("UpdatePattern = %+v, %v", upd, err)
	}
	after, err := s.GetPattern(ctx, tenant, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	comparePatterns(t, "after a no-op edit", &after.Pattern, want)
	// A pattern with nothing optional.
	bare := &patterns.Pattern{ID: newPatternID(), Signature: patterns.Signature{TaskType: patterns.TaskLookup}}
	rec = createPattern(t, s, tenant, bare)
	bare.Tenant = tenant
	comparePatterns(t, "bare pattern", &rec.Pattern, bare)
}

func testPatternTenantIsolation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, b := uniq("t"), uniq("t")
	now := baseTime()
	pa := createPattern(t, s, a, simplePattern(patterns.TaskReport, []string{"shared"}, now))
	createPattern(t, s, b, simplePattern(patterns.TaskReport, []string{"shared"}, now))
	if c, err := s.PatternCandidates(ctx, b, patterns.TaskReport, []string{"shared"}, 10); err != nil || len(c) != 1 || c[0].Tenant != b {
		t.Fatalf("b's candidates = %+v, %v", c, err)
	}
	if err := s.TouchPatterns(ctx, b, []string{pa.ID}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetPattern(ctx, a, pa.ID); !got.LastQueriedAt.IsZero() {
		t.Fatal("b touched a's pattern")
	}
	if got, _, err := s.ListPatterns(ctx, b, store.PatternFilter{IncludeShared: true}, store.Page{}); err != nil || len(got) != 1 || got[0].Tenant != b {
		t.Fatalf("b's list = %v, %v", recordIDs(got), err)
	}
	if err := s.SuppressSignature(ctx, a, patterns.Signature{TaskType: patterns.TaskReport}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SuppressedSignatures(ctx, b, now); len(got) != 0 {
		t.Fatalf("b sees a's suppressions: %+v", got)
	}
	if _, err := s.PatternCandidates(context.Background(), "", "", nil, 10); err != nil {
		t.Fatalf("PatternCandidates(empty tenant) = %v", err)
	}
}
