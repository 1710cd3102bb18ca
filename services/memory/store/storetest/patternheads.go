package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// patternHeadTests are run by Run.
var patternHeadTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"PatternHeads", testPatternHeads},
	{"PatternHeadsGrants", testPatternHeadsGrants},
	{"PatternGetPatternsFew", testPatternGetPatternsFew},
}

// testPatternHeads: all heads with the zero since, only those updated
// after since otherwise; touches are not changes, edits and learns are.
func testPatternHeads(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	old := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, []string{"acme"}, now.Add(-2*time.Hour)))
	mid := createPattern(t, s, tenant, simplePattern(patterns.TaskTrend, nil, now.Add(-time.Hour)))
	createPattern(t, s, other, simplePattern(patterns.TaskReport, []string{"acme"}, now))

	all, err := s.PatternHeads(ctx, tenant, time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := recordIDs(all), []string{old.ID, mid.ID}; !slices.Equal(got, want) {
		t.Fatalf("PatternHeads(all) = %v, want %v (by update time, no other tenant's)", got, want)
	}
	h := all[0]
	if h.Tenant != tenant || h.Name != old.Name || h.Signature.TaskType != patterns.TaskReport ||
		!slices.Equal(h.Signature.EntityTypes, old.Signature.EntityTypes) || !slices.Equal(h.Entities, old.Entities) ||
		h.UsageCount != 3 || h.SuccessCount != 3 || h.SuccessRate != 1 || h.Version != 1 ||
		!sameTime(h.UpdatedAt, old.UpdatedAt) || !sameTime(h.CreatedAt, old.CreatedAt) || !sameTime(h.LastUsedAt, old.LastUsedAt) {
		t.Fatalf("head = %+v, want the scoring fields of %+v", h, old)
	}
	if got, err := s.PatternHeads(ctx, tenant, time.Time{}, 1); err != nil || len(got) != 1 || got[0].ID != old.ID {
		t.Fatalf("PatternHeads(limit 1) = %v, %v", recordIDs(got), err)
	}
	if got, err := s.PatternHeads(ctx, tenant, time.Time{}, 0); err != nil || len(got) != 0 {
		t.Fatalf("PatternHeads(limit 0) = %v, %v", recordIDs(got), err)
	}
	if got, err := s.PatternHeads(ctx, tenant, mid.UpdatedAt, 100); err != nil || len(got) != 0 {
		t.Fatalf("PatternHeads(since the newest) = %v, %v; want none", recordIDs(got), err)
	}
	if got, err := s.PatternHeads(ctx, tenant, old.UpdatedAt, 100); err != nil || !slices.Equal(recordIDs(got), []string{mid.ID}) {
		t.Fatalf("PatternHeads(since the oldest) = %v, %v; want [%s]", recordIDs(got), err, mid.ID)
	}
	// A touch is no change.
	if err := s.TouchPatterns(ctx, tenant, []string{old.ID}, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PatternHeads(ctx, tenant, mid.UpdatedAt, 100); err != nil || len(got) != 0 {
		t.Fatalf("PatternHeads after a touch = %v, %v; want none", recordIDs(got), err)
	}
	// An edit is, read with its new version and last query time.
	edited := now.Add(time.Minute)
	if _, err := s.UpdatePattern(ctx, tenant, old.ID, 0, func(p *patterns.Pattern) error {
		p.Name, p.UpdatedAt = "renamed", edited
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PatternHeads(ctx, tenant, mid.UpdatedAt, 100)
	if err != nil || len(got) != 1 || got[0].ID != old.ID || got[0].Name != "renamed" || got[0].Version != 2 ||
		!sameTime(got[0].LastQueriedAt, now.Add(time.Minute)) || !sameTime(got[0].UpdatedAt, edited) {
		t.Fatalf("PatternHeads after an edit = %+v, %v", got, err)
	}
	// So is a learned (evolved) one.
	tr := &store.TraceRecord{Tenant: tenant, RunID: uniq("run"), Trace: patterns.Trace{UserGoal: "again", Success: true}}
	if _, err := s.LearnTrace(ctx, tr, patterns.TaskTrend, "", func(cs []*store.PatternRecord) (*store.PatternRecord, bool, error) {
		if len(cs) != 1 {
			t.Errorf("learn candidates = %v", recordIDs(cs))
			return nil, false, nil
		}
		cs[0].UsageCount++
		cs[0].UpdatedAt = edited.Add(time.Second)
		return cs[0], false, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.PatternHeads(ctx, tenant, edited, 100)
	if err != nil || len(got) != 1 || got[0].ID != mid.ID || got[0].UsageCount != 4 || got[0].Version != 2 {
		t.Fatalf("PatternHeads after a learn = %+v, %v", got, err)
	}
	// A deleted pattern is gone from a full read.
	if err := s.DeletePattern(ctx, tenant, mid.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PatternHeads(ctx, tenant, time.Time{}, 100); err != nil || !slices.Equal(recordIDs(got), []string{old.ID}) {
		t.Fatalf("PatternHeads after a delete = %v, %v", recordIDs(got), err)
	}
}

// testPatternHeadsGrants: a granted pattern is a head of the grantee's
// when updated or granted after since, marked by its owner; a revoked one
// is gone.
func testPatternHeadsGrants(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	owner, grantee := uniq("t"), uniq("t")
	now := baseTime()
	p := createPattern(t, s, owner, simplePattern(patterns.TaskReport, []string{"acme"}, now.Add(-time.Hour)))
	if got, err := s.PatternHeads(ctx, grantee, time.Time{}, 100); err != nil || len(got) != 0 {
		t.Fatalf("grantee heads before the grant = %v, %v", recordIDs(got), err)
	}
	grantedAt := now
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: owner, PatternID: p.ID, Grantee: grantee, CreatedAt: grantedAt}); err != nil {
		t.Fatal(err)
	}
	// Updated before since, granted after: reported.
	got, err := s.PatternHeads(ctx, grantee, now.Add(-time.Minute), 100)
	if err != nil || len(got) != 1 || got[0].ID != p.ID || got[0].Tenant != owner {
		t.Fatalf("grantee heads since before the grant = %+v, %v", got, err)
	}
	if got, err := s.PatternHeads(ctx, grantee, grantedAt, 100); err != nil || len(got) != 0 {
		t.Fatalf("grantee heads since the grant = %v, %v", recordIDs(got), err)
	}
	// Updated after since: reported again.
	if _, err := s.UpdatePattern(ctx, owner, p.ID, 0, func(q *patterns.Pattern) error {
		q.Name, q.UpdatedAt = "renamed", now.Add(time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.PatternHeads(ctx, grantee, grantedAt, 100)
	if err != nil || len(got) != 1 || got[0].Name != "renamed" || got[0].Tenant != owner {
		t.Fatalf("grantee heads after the owner's edit = %+v, %v", got, err)
	}
	// The owner sees its own pattern once, as its own.
	if got, err := s.PatternHeads(ctx, owner, time.Time{}, 100); err != nil || len(got) != 1 || got[0].Tenant != owner {
		t.Fatalf("owner heads = %+v, %v", got, err)
	}
	if err := s.RevokePatternGrant(ctx, owner, p.ID, grantee); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PatternHeads(ctx, grantee, time.Time{}, 100); err != nil || len(got) != 0 {
		t.Fatalf("grantee heads after the revoke = %v, %v", recordIDs(got), err)
	}
}

// testPatternGetPatternsFew: a handful of ids, own and granted, in the
// order asked, missing and revoked ones left out.
func testPatternGetPatternsFew(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	tenant, other := uniq("t"), uniq("t")
	now := baseTime()
	a := createPattern(t, s, tenant, simplePattern(patterns.TaskReport, nil, now))
	b := createPattern(t, s, tenant, simplePattern(patterns.TaskTrend, nil, now))
	theirs := createPattern(t, s, other, simplePattern(patterns.TaskReport, nil, now))
	hidden := createPattern(t, s, other, simplePattern(patterns.TaskReport, nil, now))
	if _, err := s.GrantPattern(ctx, store.PatternGrant{Owner: other, PatternID: theirs.ID, Grantee: tenant}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPatterns(ctx, tenant, []string{theirs.ID, "pt_missing", b.ID, hidden.ID, a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if ids, want := recordIDs(got), []string{theirs.ID, b.ID, a.ID}; !slices.Equal(ids, want) {
		t.Fatalf("GetPatterns = %v, want %v", ids, want)
	}
	if got[0].Tenant != other || got[1].Tenant != tenant || len(got[2].Steps) == 0 {
		t.Fatalf("GetPatterns owners/bodies = %+v", got)
	}
	if err := s.RevokePatternGrant(ctx, other, theirs.ID, tenant); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPatterns(ctx, tenant, []string{theirs.ID, a.ID}); err != nil || !slices.Equal(recordIDs(got), []string{a.ID}) {
		t.Fatalf("GetPatterns after the revoke = %v, %v", recordIDs(got), err)
	}
}
