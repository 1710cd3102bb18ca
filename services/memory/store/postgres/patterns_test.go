package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/store/storetest"
)

// TestSettingsBeforePatternsReadEnabled writes a settings row at schema
// version 1 (before the pattern switches existed), then migrates: the row
// reads PatternsEnabled = true and no excluded conversation.
func TestSettingsBeforePatternsReadEnabled(t *testing.T) {
	ctx := testCtx(t)
	dsn := newDSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, q := range []string{
		`CREATE TABLE memory_schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		migrations[0],
		`INSERT INTO memory_schema_version (version) VALUES (1)`,
		`INSERT INTO memory_settings (tenant, capture_runs, tools_enabled, disabled_conversations) VALUES ('old', false, true, '{c9}')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s := openDSN(t, dsn)
	st, err := s.GetSettings(ctx, "old")
	if err != nil || !st.PatternsEnabled || len(st.PatternsDisabledConversations) != 0 || st.CaptureRuns || !st.ToolsEnabled ||
		len(st.CaptureDisabledConversations) != 1 {
		t.Fatalf("settings written before patterns = %+v, %v", st, err)
	}
}

// TestLearnTraceSerialisedAcrossReplicas: two stores (two pools, as two
// replicas) learn traces of one signature for one tenant at once; the
// advisory lock makes them one pattern that counts every trace.
func TestLearnTraceSerialisedAcrossReplicas(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := testCtx(t)
	now := time.Now().UTC()
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := patterns.Trace{RunID: fmt.Sprintf("run-%d", i), UserGoal: "weekly revenue trend", Success: true,
				EntityTypes: []string{"metric"}, Entities: []string{"revenue"}}
			sig := patterns.NewSignature(tr.UserGoal, tr.EntityTypes)
			_, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "acme", RunID: tr.RunID, Trace: tr}, sig.TaskType, "",
				func(cands []*store.PatternRecord) (*store.PatternRecord, bool, error) {
					ps := make([]*patterns.Pattern, len(cands))
					for i, c := range cands {
						ps[i] = &c.Pattern
					}
					changed, created := patterns.Learn(&tr, ps, now, func() *patterns.Pattern {
						return &patterns.Pattern{ID: newID("pt_")}
					})
					for _, c := range cands {
						if &c.Pattern == changed {
							return c, false, nil
						}
					}
					if changed == nil {
						return nil, false, nil
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
	got, _, err := a.ListPatterns(ctx, "acme", store.PatternFilter{}, store.Page{})
	if err != nil || len(got) != 1 || got[0].UsageCount != n || got[0].Version != n {
		t.Fatalf("patterns = %d, %v; want one used %d times", len(got), err, n)
	}
}

// TestPatternTextPostgresCannotHold: NUL and invalid UTF-8 in a trace's or
// a pattern's text are stored (jsonb refuses \u0000, text refuses both),
// and ids PostgreSQL cannot hold are NotFound on reads.
func TestPatternTextPostgresCannotHold(t *testing.T) {
	s, _ := openTest(t)
	ctx := testCtx(t)
	bad := "a\x00b\xffc"
	p := patterns.Pattern{ID: "pt_1", Name: bad, Description: bad, Entities: []string{bad, "ok"},
		Signature: patterns.Signature{TaskType: patterns.TaskLookup, EntityTypes: []string{bad}},
		Steps:     []patterns.Step{{Description: bad}}}
	out, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "t", RunID: "r1", Trace: patterns.Trace{UserGoal: bad, FinalResult: `\u0000` + bad}},
		patterns.TaskLookup, "", func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
			return &store.PatternRecord{Pattern: p}, true, nil
		})
	if err != nil || !out.Created {
		t.Fatalf("LearnTrace with NUL and invalid UTF-8 = %+v, %v", out, err)
	}
	tr, err := s.GetTrace(ctx, "t", "r1")
	if err != nil || strings.ContainsRune(tr.Trace.UserGoal, 0) || !strings.HasPrefix(tr.Trace.FinalResult, `\u0000`) {
		t.Fatalf("GetTrace = %+v, %v", tr, err)
	}
	got, err := s.GetPattern(ctx, "t", "pt_1")
	if err != nil || got.Name == "" || strings.ContainsRune(got.Name, 0) || len(got.Steps) != 1 {
		t.Fatalf("GetPattern = %+v, %v", got, err)
	}
	if err := s.SuppressSignature(ctx, "t", patterns.Signature{TaskType: bad, EntityTypes: []string{bad}}, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("SuppressSignature(bad text) = %v", err)
	}
	for _, id := range []string{"pt_1\x00", "\xff"} {
		if _, err := s.GetPattern(ctx, "t", id); err == nil {
			t.Fatalf("GetPattern(%q) found something", id)
		}
		if _, err := s.GetPattern(ctx, id, "pt_1"); err == nil {
			t.Fatalf("GetPattern as tenant %q found something", id)
		}
	}
	if c, err := s.PatternCandidates(ctx, "t\x00", patterns.TaskLookup, []string{bad}, 10); err != nil || len(c) != 0 {
		t.Fatalf("PatternCandidates(bad tenant) = %v, %v", c, err)
	}
	// A used pattern or task type no pattern can have: learn sees the
	// candidates there are.
	var seen []string
	if _, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "t", RunID: "r3"}, patterns.TaskLookup, "pt\xff",
		func(c []*store.PatternRecord) (*store.PatternRecord, bool, error) {
			seen = recordIDsOf(c)
			return nil, false, nil
		}); err != nil || len(seen) != 1 {
		t.Fatalf("LearnTrace(used %q) = %v, candidates %v", "pt\xff", err, seen)
	}
	if _, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "t", RunID: "r4"}, "x\x00", "",
		func(c []*store.PatternRecord) (*store.PatternRecord, bool, error) {
			seen = recordIDsOf(c)
			return nil, false, nil
		}); err != nil || len(seen) != 0 {
		t.Fatalf("LearnTrace(task type with NUL) = %v, candidates %v", err, seen)
	}
	if _, err := s.LearnTrace(ctx, &store.TraceRecord{Tenant: "t\x00", RunID: "r2"}, patterns.TaskLookup, "",
		func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil }); err == nil {
		t.Fatal("LearnTrace for a tenant PostgreSQL cannot hold was accepted")
	}
}

func TestJSONBSafe(t *testing.T) {
	for in, want := range map[string]string{
		`"plain"`:              `"plain"`,
		`"a\u0000b"`:           `"a\ufffdb"`,
		`"a\\u0000b"`:          `"a\\u0000b"`,
		`"a\\\u0000b"`:         `"a\\\ufffdb"`,
		`["\u0000","\u00001"]`: `["\ufffd","\ufffd1"]`,
		`"\u0000`:              `"\ufffd`,
	} {
		if got := string(jsonbSafe([]byte(in))); got != want {
			t.Errorf("jsonbSafe(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzJSONBSafe: for any string, the JSON encoding made safe decodes to
// the string with each NUL replaced by U+FFFD, and holds no \u0000.
func FuzzJSONBSafe(f *testing.F) {
	for _, s := range []string{"", "a\x00b", `\u0000`, "\\\x00", "\xff\x00", "日本\x00語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		safe := jsonbSafe(b)
		if bytes.Contains(safe, []byte(`\u0000`)) && !bytes.Contains(b, []byte(`\\u0000`)) {
			t.Fatalf("jsonbSafe(%s) = %s keeps a NUL escape", b, safe)
		}
		var back string
		if err := json.Unmarshal(safe, &back); err != nil {
			t.Fatalf("jsonbSafe(%s) = %s: %v", b, safe, err)
		}
		var orig string
		_ = json.Unmarshal(b, &orig)
		if want := strings.ReplaceAll(orig, "\x00", "\uFFFD"); back != want {
			t.Fatalf("jsonbSafe(%s) decodes to %q, want %q", b, back, want)
		}
	})
}

func TestPatternCursor(t *testing.T) {
	c := patternCursor{micros: time.Now().UnixMicro(), owner: "ten|ant", id: "pt_1"}
	got, err := decodePatternCursor(encodePatternCursor(c))
	if err != nil || got != c {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, c)
	}
	for _, tok := range []string{"", "!!", encodeToken("nope", "pt_1"), encodeToken("12", "pt_1"), encodeToken("x|a", "pt_1"), encodeToken("1|a\x00", "pt_1")} {
		if _, err := decodePatternCursor(tok); err == nil {
			t.Errorf("decodePatternCursor(%q) accepted", tok)
		}
	}
}

// FuzzPatternCursor: any token decodes or fails without panicking, and
// what decodes encodes back to a token that decodes to the same cursor.
func FuzzPatternCursor(f *testing.F) {
	f.Add(encodePatternCursor(patternCursor{micros: 1, owner: "t", id: "pt_1"}))
	f.Add("")
	f.Add("AAAABHx8fHw")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := decodePatternCursor(tok)
		if err != nil {
			return
		}
		again, err := decodePatternCursor(encodePatternCursor(c))
		if err != nil || again != c {
			t.Fatalf("cursor %+v re-decodes to %+v, %v", c, again, err)
		}
	})
}

// BenchmarkPatternCandidates: retrieval's candidate query at 10,000
// patterns per tenant (storetest.BenchPatternCandidates).
func BenchmarkPatternCandidates(b *testing.B) {
	s, _ := openTest(b)
	storetest.SeedBenchPatterns(b, s)
	// As autovacuum would after the writes.
	if _, err := s.Pool().Exec(testCtx(b), `ANALYZE memory_patterns`); err != nil {
		b.Fatal(err)
	}
	storetest.BenchPatternCandidates(b, s)
}

// TestLearnTraceObserved: every LearnTrace, a duplicate's included, is
// timed.
func TestLearnTraceObserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(testCtx(t), newDSN(t), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for range 2 {
		if _, err := s.LearnTrace(testCtx(t), &store.TraceRecord{Tenant: "t", RunID: "r1"}, patterns.TaskLookup, "",
			func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return nil, false, nil }); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "baagent_memory_postgres_learn_trace_seconds" {
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n != 2 {
				t.Fatalf("learn_trace_seconds count = %d, want 2", n)
			}
			return
		}
	}
	t.Fatal("baagent_memory_postgres_learn_trace_seconds not registered")
}

func recordIDsOf(rs []*store.PatternRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// BenchmarkLearnTrace: one trace learned at 10,000 patterns per tenant
// (storetest.BenchLearnTrace).
func BenchmarkLearnTrace(b *testing.B) {
	s, _ := openTest(b)
	storetest.SeedBenchPatterns(b, s)
	if _, err := s.Pool().Exec(testCtx(b), `ANALYZE memory_patterns`); err != nil {
		b.Fatal(err)
	}
	storetest.BenchLearnTrace(b, s)
}
