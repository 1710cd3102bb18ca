package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/store"
)

// benchPatterns is how many patterns BenchmarkMatchPatterns's tenant has.
const benchPatterns = 10_000

// populatePatterns writes n learned patterns for tenant through the
// store's LearnTrace, spread over the task types, 1-3 entity types of
// eight and 1-4 entity names of the graph populate writes, with the
// counters and times of patterns in use (most admitted, some failing,
// some stale).
func populatePatterns(tb testing.TB, st store.Store, tenant string, n int) {
	tb.Helper()
	ctx := tb.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	tasks := []string{patterns.TaskReport, patterns.TaskComparison, patterns.TaskTrend, patterns.TaskRanking,
		patterns.TaskBreakdown, patterns.TaskDataQuality, patterns.TaskLookup}
	types := []string{"customer", "product", "order", "region", "channel", "category", "supplier", "employee"}
	now := time.Now().UTC()
	for i := range n {
		task := tasks[i%len(tasks)]
		var ets []string
		for range 1 + rng.IntN(3) {
			ets = append(ets, types[rng.IntN(len(types))])
		}
		var names []string
		for range 1 + rng.IntN(4) {
			names = append(names, benchEntityName(rng.IntN(3000)))
		}
		age := time.Duration(rng.IntN(30*24)) * time.Hour
		uses := 3 + rng.IntN(20)
		fails := rng.IntN(uses / 2)
		p := patterns.Pattern{
			ID: newID(patternPrefix, now), Tenant: tenant,
			Name: fmt.Sprintf("%s pattern %d", task, i), Description: "Learned from a run",
			Signature: patterns.NewSignature("", ets), Entities: patterns.NewSignature("", names).EntityTypes,
			Steps: []patterns.Step{
				{Description: "Query the warehouse", Tools: []string{"sql_query"}},
				{Description: "Chart the result", Tools: []string{"chart"}},
			},
			ToolChains: [][]string{{"sql_query", "chart"}},
			UsageCount: uses, SuccessCount: uses - fails, FailureCount: fails,
			SuccessRate: float64(uses-fails) / float64(uses), AvgDurationMs: 5000,
			CreatedAt: now.Add(-age - time.Hour), UpdatedAt: now.Add(-age), LastUsedAt: now.Add(-age),
			LastQueriedAt: now.Add(-age / 2),
		}
		p.Signature.TaskType = task
		rec := &store.PatternRecord{Pattern: p}
		_, err := st.LearnTrace(ctx, &store.TraceRecord{Tenant: tenant, RunID: fmt.Sprintf("bench-%d", i), CreatedAt: now,
			// The task type asked for matches no pattern: the store then
			// reads no candidates, and writing stays linear.
			Trace: patterns.Trace{RunID: fmt.Sprintf("bench-%d", i), UserGoal: "bench", Success: true}}, "bench-populate", "",
			func([]*store.PatternRecord) (*store.PatternRecord, bool, error) { return rec, true, nil })
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// benchEntityName is the name populate gives entity i.
func benchEntityName(i int) string {
	prefixes := []string{"Acme", "Blue", "Cedar", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper",
		"Kestrel", "Lumen", "Maple", "Nova", "Orchid", "Pine", "Quartz", "River", "Summit", "Tide"}
	suffixes := []string{"Labs", "Retail", "Logistics", "Foods", "Partners", "Systems", "Works", "Health", "Energy", "Studios"}
	products := []string{"Edge Router", "Rack Server", "NAS Storage", "Access Point", "Managed Switch", "Thin Client",
		"Analytics Suite", "Backup Manager", "Endpoint Security", "CRM Cloud", "Data Pipeline", "Dashboard Builder"}
	switch i % 3 {
	case 0:
		return fmt.Sprintf("%s %s %d", prefixes[i%20], suffixes[(i/20)%10], i)
	case 1:
		return fmt.Sprintf("%s %d", products[i%12], i)
	}
	return fmt.Sprintf("ORD-%07d", i)
}

// BenchmarkMatchPatterns is MatchPatterns over gRPC on loopback for a
// tenant of 10,000 patterns and a graph of 3,000 entities, on SQLite and
// PostgreSQL: classification, the entity lookup, candidates, touching the
// matching ones, ranking and reading the winners. p50-ms and p99-ms are
// the measured latencies' percentiles.
func BenchmarkMatchPatterns(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(testing.TB) store.Store
	}{{"sqlite", openStore}, {"postgres", openPostgres}} {
		b.Run(backend.name, func(b *testing.B) {
			st := backend.open(b)
			start := time.Now()
			populate(b, st, "bench", 3000)
			populatePatterns(b, st, "bench", benchPatterns)
			b.Logf("%s: %d patterns written in %s", backend.name, benchPatterns, time.Since(start))
			ts := newTestServer(b, Options{Store: st}, false)
			goals := []string{
				"Report the revenue of " + benchEntityName(300) + " by region",
				"Compare " + benchEntityName(301) + " against " + benchEntityName(304),
				"Show the monthly trend of orders for " + benchEntityName(600),
				"Which were the top products last quarter?",
				"Find duplicate orders like " + benchEntityName(602),
				"What is the status of " + benchEntityName(905) + "?",
			}
			// rpc: the steady state of a running service, the tenant's
			// heads held by the index (read once before the loop), call
			// by call alternating with a server without the index on the
			// same store (the path before the index; noindex-p50-ms and
			// noindex-p99-ms), so both see the same load.
			noIndex := newTestServer(b, Options{Store: st, PatternIndex: PatternIndexOptions{MaxHeads: -1}}, false)
			for _, c := range []baagentv1.MemoryServiceClient{ts.c, noIndex.c} {
				for _, g := range goals {
					if _, err := c.MatchPatterns(b.Context(), &baagentv1.MatchPatternsRequest{Tenant: "bench", Goal: g}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run("rpc", func(b *testing.B) {
				var times, plain []time.Duration
				offered := 0
				i := 0
				for b.Loop() {
					req := &baagentv1.MatchPatternsRequest{Tenant: "bench", Goal: goals[i%len(goals)]}
					start := time.Now()
					res, err := ts.c.MatchPatterns(b.Context(), req)
					times = append(times, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					start = time.Now()
					other, err := noIndex.c.MatchPatterns(b.Context(), req)
					plain = append(plain, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					if len(other.GetCandidates()) != len(res.GetCandidates()) {
						b.Fatalf("goal %q: %d candidates with the index, %d without", req.Goal, len(res.GetCandidates()), len(other.GetCandidates()))
					}
					offered += len(res.GetCandidates())
					i++
				}
				if offered == 0 {
					b.Fatal("no pattern offered")
				}
				reportMillis(b, times)
				slices.Sort(plain)
				b.ReportMetric(float64(plain[len(plain)/2].Microseconds())/1000, "noindex-p50-ms")
				b.ReportMetric(float64(plain[len(plain)*99/100].Microseconds())/1000, "noindex-p99-ms")
				b.ReportMetric(float64(offered)/float64(i), "candidates/op")
			})
			// rpc-cold: the first match of the tenant on a replica, which
			// reads its heads whole (a fresh index before each call).
			b.Run("rpc-cold", func(b *testing.B) {
				benchMatch(b, ts.c, goals, func() {
					ts.srv.patternIndex = newPatternIndex(ts.srv.opts.PatternIndex, st, ts.srv.metrics, ts.srv.now)
				})
			})
			// The winners' read alone: three whole patterns by id.
			b.Run("store-winners", func(b *testing.B) {
				res, err := ts.c.MatchPatterns(b.Context(), &baagentv1.MatchPatternsRequest{Tenant: "bench", Goal: goals[0]})
				if err != nil || len(res.GetCandidates()) == 0 {
					b.Fatalf("match: %v, %v", res, err)
				}
				var ids []string
				for _, c := range res.GetCandidates() {
					ids = append(ids, c.GetPattern().GetId())
				}
				var times []time.Duration
				for b.Loop() {
					start := time.Now()
					got, err := st.GetPatterns(b.Context(), "bench", ids)
					times = append(times, time.Since(start))
					if err != nil || len(got) != len(ids) {
						b.Fatalf("GetPatterns = %d, %v", len(got), err)
					}
				}
				reportMillis(b, times)
			})
			// The changes since a second ago: what the index asks the
			// store on each match.
			b.Run("store-heads-changed", func(b *testing.B) {
				var times []time.Duration
				for b.Loop() {
					start := time.Now()
					_, err := st.PatternHeads(b.Context(), "bench", time.Now().Add(-DefaultPatternIndexMargin), 1000)
					times = append(times, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
				}
				reportMillis(b, times)
			})
			// The goal's entity lookup alone (the phrase lookup of hybrid
			// search: one FindEntity per phrase).
			b.Run("entity-lookup", func(b *testing.B) {
				var times []time.Duration
				i := 0
				for b.Loop() {
					start := time.Now()
					if _, _, err := ts.srv.goalEntities(b.Context(), "bench", goals[i%len(goals)]); err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(start))
					i++
				}
				reportMillis(b, times)
			})
			// The store's candidate query alone, with the task types and
			// entities of the goals above, for the share of it in the RPC.
			b.Run("store-candidates", func(b *testing.B) {
				type q struct {
					task  string
					names []string
				}
				var qs []q
				for _, g := range goals {
					names, _, err := ts.srv.goalEntities(b.Context(), "bench", g)
					if err != nil {
						b.Fatal(err)
					}
					qs = append(qs, q{patterns.ClassifyTask(g), names})
				}
				var times []time.Duration
				rows := 0
				i := 0
				for b.Loop() {
					start := time.Now()
					cs, err := st.PatternCandidates(b.Context(), "bench", qs[i%len(qs)].task, qs[i%len(qs)].names, MaxPatternCandidates)
					times = append(times, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					rows += len(cs)
					i++
				}
				reportMillis(b, times)
				b.ReportMetric(float64(rows)/float64(i), "rows/op")
			})
		})
	}
}

// benchMatch times MatchPatterns over the goals; before, when not nil,
// runs before each call.
func benchMatch(b *testing.B, c baagentv1.MemoryServiceClient, goals []string, before func()) {
	var times []time.Duration
	offered := 0
	i := 0
	for b.Loop() {
		if before != nil {
			before()
		}
		start := time.Now()
		res, err := c.MatchPatterns(b.Context(), &baagentv1.MatchPatternsRequest{Tenant: "bench", Goal: goals[i%len(goals)]})
		times = append(times, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		offered += len(res.GetCandidates())
		i++
	}
	if offered == 0 {
		b.Fatal("no pattern offered")
	}
	reportMillis(b, times)
	b.ReportMetric(float64(offered)/float64(i), "candidates/op")
}

// reportMillis reports the p50 and p99 of times in milliseconds.
func reportMillis(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}
