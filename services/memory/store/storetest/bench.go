package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/baagent/baagent/core/patterns"
	"github.com/baagent/baagent/services/memory/store"
)

// The pattern candidates benchmark's dataset: BenchPatterns patterns for
// the tenant BenchPatternTenant and as many for another tenant, over the 7
// task types, each with 2 to 6 entities drawn from a vocabulary of 500
// names and an update time within the last 200 days, from a fixed seed.
const (
	BenchPatterns      = 10_000
	BenchPatternTenant = "bench-patterns"
	benchVocabulary    = 500
)

var benchTaskTypes = []string{patterns.TaskDataQuality, patterns.TaskReport, patterns.TaskComparison,
	patterns.TaskTrend, patterns.TaskRanking, patterns.TaskBreakdown, patterns.TaskLookup}

func benchEntity(i int) string { return fmt.Sprintf("entity %03d", i) }

// SeedBenchPatterns writes the dataset through LearnTrace (one trace per
// pattern), unless the tenant already holds it.
func SeedBenchPatterns(tb testing.TB, s store.Store) {
	tb.Helper()
	ctx := context.Background()
	if got, _, err := s.ListPatterns(ctx, BenchPatternTenant, store.PatternFilter{}, store.Page{Size: 1}); err == nil && len(got) == 1 {
		return
	}
	now := time.Now().UTC()
	errs := make(chan error, 2)
	for t, tenant := range []string{BenchPatternTenant, BenchPatternTenant + "-other"} {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(t)+1, 28))
			for i := range BenchPatterns {
				ents := make([]string, 0, 6)
				for n := 2 + rng.IntN(5); len(ents) < n; {
					if e := benchEntity(rng.IntN(benchVocabulary)); !contains(ents, e) {
						ents = append(ents, e)
					}
				}
				updated := now.Add(-time.Duration(rng.Int64N(int64(200 * 24 * time.Hour))))
				p := simplePattern(benchTaskTypes[rng.IntN(len(benchTaskTypes))], ents, updated)
				p.Signature.EntityTypes = []string{"metric", "region"}[:1+rng.IntN(2)]
				p.LastQueriedAt = updated
				p.Steps = append(p.Steps, patterns.Step{Description: "chart the result by region and month", Tools: []string{"chart"}},
					patterns.Step{Description: "write the summary", Tools: []string{"report"}})
				tr := &store.TraceRecord{Tenant: tenant, RunID: fmt.Sprintf("seed-%d", i), CreatedAt: updated}
				// No candidates are needed: a task type no pattern has
				// keeps the seed linear.
				if _, err := s.LearnTrace(ctx, tr, "seed", "", func([]*store.PatternRecord) (*store.PatternRecord, bool, error) {
					return &store.PatternRecord{Pattern: *p}, true, nil
				}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			tb.Fatalf("seed patterns: %v", err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// BenchPatternCandidates measures one PatternCandidates query as
// retrieval makes it: a task type and 3 entities, limit 2000, on the
// dataset of SeedBenchPatterns. It reports the candidates returned.
func BenchPatternCandidates(b *testing.B, s store.Store) {
	SeedBenchPatterns(b, s)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	queries := make([][]string, 64)
	for i := range queries {
		queries[i] = []string{benchEntity(rng.IntN(benchVocabulary)), benchEntity(rng.IntN(benchVocabulary)), benchEntity(rng.IntN(benchVocabulary))}
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		got, err := s.PatternCandidates(ctx, BenchPatternTenant, benchTaskTypes[i%len(benchTaskTypes)], queries[i%len(queries)], 2000)
		if err != nil {
			b.Fatal(err)
		}
		n += len(got)
		if i == 0 && len(got) < BenchPatterns/len(benchTaskTypes)/2 {
			b.Fatalf("only %d candidates", len(got))
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "candidates/op")
}

// BenchLearnTrace measures LearnTrace on the dataset of SeedBenchPatterns
// as the memory service makes it: the candidates are the tenant's whole
// patterns of the trace's task type (about 1,430), and the trace evolves
// one of them.
func BenchLearnTrace(b *testing.B, s store.Store) {
	SeedBenchPatterns(b, s)
	ctx := context.Background()
	now := time.Now().UTC()
	b.ReportAllocs()
	b.ResetTimer()
	cands := 0
	for i := 0; b.Loop(); i++ {
		tr := &store.TraceRecord{Tenant: BenchPatternTenant, RunID: fmt.Sprintf("bench-learn-%d-%d", now.UnixNano(), i), CreatedAt: now,
			Trace: patterns.Trace{UserGoal: "monthly revenue report", Success: true, DurationMs: 900}}
		_, err := s.LearnTrace(ctx, tr, patterns.TaskReport, "", func(cs []*store.PatternRecord) (*store.PatternRecord, bool, error) {
			if len(cs) == 0 {
				return nil, false, fmt.Errorf("no candidates")
			}
			cands += len(cs)
			p := cs[i%len(cs)]
			patterns.Evolve(&p.Pattern, &tr.Trace, now)
			return p, false, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cands)/float64(b.N), "candidates/op")
}
