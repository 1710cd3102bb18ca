package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/storetest"
)

// TestMigrationToPatternsKeepsSettings opens a database at schema version
// 2 (before interaction patterns) holding a tenant's settings: the
// migration adds the pattern tables, and the settings row, written before
// PatternsEnabled existed, reads it as true.
func TestMigrationToPatternsKeepsSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append([]string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version (version) VALUES (2)`},
		migrations[:2]...) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO tenants (tenant, settings) VALUES ('old', '{"capture_runs":false,"tools_enabled":true,"capture_disabled_conversations":["c9"]}')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	st, err := s.GetSettings(ctx, "old")
	if err != nil || !st.PatternsEnabled || st.CaptureRuns || !st.ToolsEnabled || len(st.CaptureDisabledConversations) != 1 || len(st.PatternsDisabledConversations) != 0 {
		t.Fatalf("settings written before patterns = %+v, %v", st, err)
	}
	// The pattern tables work.
	out, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "old", RunID: "r1"}, patterns.TaskLookup, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
			return &store.PatternRecord{Pattern: patterns.Pattern{ID: "pt_1", Signature: patterns.Signature{TaskType: patterns.TaskLookup}}}, true, nil
		})
	if err != nil || !out.Created {
		t.Fatalf("LearnTrace after the migration = %+v, %v", out, err)
	}
}

// TestCorruptPatternBodyIsAnError: a body that does not decode is reported,
// not read as an empty pattern.
func TestCorruptPatternBodyIsAnError(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	defer func() { _ = s.Close() }()
	if _, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "t", RunID: "r1"}, patterns.TaskLookup, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
			return &store.PatternRecord{Pattern: patterns.Pattern{ID: "pt_1", Signature: patterns.Signature{TaskType: patterns.TaskLookup}}}, true, nil
		}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE patterns SET body = '{"id":' WHERE id = 'pt_1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPattern(ctx, "t", "pt_1"); err == nil {
		t.Fatal("GetPattern read a corrupt body")
	}
	if _, err := s.UpdatePattern(ctx, "t", "pt_1", 0, func(*patterns.Pattern) error { return nil }); err == nil {
		t.Fatal("UpdatePattern read a corrupt body")
	}
}

// BenchmarkPatternCandidates: retrieval's candidate query at 10,000
// patterns per tenant (storetest.BenchPatternCandidates).
func BenchmarkPatternCandidates(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "memory.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchPatternCandidates(b, s)
}

// BenchmarkLearnTrace: one trace learned at 10,000 patterns per tenant
// (storetest.BenchLearnTrace).
func BenchmarkLearnTrace(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "memory.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchLearnTrace(b, s)
}
