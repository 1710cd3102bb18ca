package postgres

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/internal/testkit/pgtest"
	"github.com/baagent/baagent/services/memory/store"
)

// The benchmark graph: one large tenant and a few small ones, loaded with
// COPY once per benchmark process.
const (
	benchTenant    = "bench"
	benchEntities  = 100_000
	benchRelations = 200_000
	benchOthers    = 3 // other tenants, each a tenth of the size
	benchDims      = 256
	benchVocab     = 20_000
)

var bench struct {
	once  sync.Once
	err   error
	dsn   string
	vocab []string
	ids   []string // the big tenant's entity ids
}

// word is a made-up word for vocabulary entry i.
func word(i int) string {
	const syl = "ka lo ve ri no sa te mu zi pa do ne"
	parts := strings.Fields(syl)
	var b strings.Builder
	for n := i + 1; n > 0; n /= len(parts) {
		b.WriteString(parts[n%len(parts)])
	}
	return b.String()
}

func randomUnit(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	var n float64
	for i := range v {
		x := r.NormFloat64()
		v[i] = float32(x)
		n += x * x
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

// benchStore opens a store on the benchmark database, loading it on first
// use.
func benchStore(b *testing.B) *Store {
	b.Helper()
	srv := pgtest.Shared(b)
	bench.once.Do(func() { bench.err = loadBench(srv) })
	if bench.err != nil {
		b.Fatalf("load: %v", bench.err)
	}
	s, err := Open(context.Background(), bench.dsn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func loadBench(srv *pgtest.Server) error {
	ctx := context.Background()
	start := time.Now()
	name, err := srv.CreateDatabase(ctx)
	if err != nil {
		return err
	}
	bench.dsn = srv.DSN(name)
	s, err := Open(ctx, bench.dsn, Options{})
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	for i := range benchVocab {
		bench.vocab = append(bench.vocab, word(i))
	}
	r := rand.New(rand.NewPCG(7, 11))
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	load := func(tenant string, nEnt, nRel int) ([]string, error) {
		ids := make([]string, nEnt)
		now := time.Now()
		types := []string{"person", "organization", "project", "place", "concept"}
		i := 0
		_, err := conn.CopyFrom(ctx, pgx.Identifier{"memory_entities"},
			[]string{"tenant", "id", "name", "type", "summary", "attributes", "attr_text", "embedding", "mention_count", "created_at", "updated_at", "seq"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if i == nEnt {
					return nil, nil
				}
				ids[i] = fmt.Sprintf("en_%026d", i)
				w := func() string { return bench.vocab[wordIndex(r)] }
				name := fmt.Sprintf("%s %s %d", strings.ToUpper(w()[:1])+w()[1:], w(), i)
				summary := strings.Join([]string{w(), w(), w(), w(), w(), w(), w(), w()}, " ")
				attrs := map[string]string{"kind": w()}
				row := []any{tenant, ids[i], name, types[i%len(types)], summary, attrs, attrText(attrs),
					randomUnit(r, benchDims), 1 + r.IntN(5), now, now, int64(1)}
				i++
				return row, nil
			}))
		if err != nil {
			return nil, err
		}
		seen := map[[2]int]bool{}
		j := 0
		_, err = conn.CopyFrom(ctx, pgx.Identifier{"memory_relations"},
			[]string{"tenant", "id", "source_id", "target_id", "type", "fact", "weight", "episode_count", "updated_at"},
			pgx.CopyFromFunc(func() ([]any, error) {
				for j < nRel {
					// Preferential: low ids are hubs.
					a, c := zipf(r, nEnt), r.IntN(nEnt)
					if a == c || seen[[2]int{a, c}] {
						continue
					}
					seen[[2]int{a, c}] = true
					j++
					return []any{tenant, fmt.Sprintf("re_%026d", j), ids[a], ids[c], "relates_to", "",
						0.1 + 0.9*r.Float64(), 1, now}, nil
				}
				return nil, nil
			}))
		if err != nil {
			return nil, err
		}
		_, err = conn.Exec(ctx, `INSERT INTO memory_tenants (tenant, seq, graph_changed_at) VALUES ($1, 1, now())`, tenant)
		return ids, err
	}
	if bench.ids, err = load(benchTenant, benchEntities, benchRelations); err != nil {
		return err
	}
	for t := range benchOthers {
		if _, err := load(fmt.Sprintf("other-%d", t), benchEntities/10, benchRelations/10); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	var size string
	if err := conn.QueryRow(ctx, "SELECT pg_size_pretty(pg_database_size(current_database()))").Scan(&size); err != nil {
		return err
	}
	fmt.Printf("bench: loaded %d entities and %d relations (+%d tenants a tenth the size) in %s; database %s\n",
		benchEntities, benchRelations, benchOthers, time.Since(start).Round(time.Millisecond), size)
	return nil
}

// zipf picks 0..n-1 with small numbers more likely, about as 1/x (hub
// entities: the busiest has thousands of relations).
func zipf(r *rand.Rand, n int) int {
	return int(math.Floor(math.Pow(float64(n), r.Float64()))) - 1
}

// wordIndex picks a vocabulary word, skewed like content words once stop
// words are gone: the commonest appear in a few per cent of entities.
func wordIndex(r *rand.Rand) int {
	return int(math.Floor(math.Pow(benchVocab, 0.3+0.7*r.Float64()))) - 1
}

// latency records per-operation times and reports their median and 95th
// percentile.
type latency []time.Duration

func (l latency) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l[len(l)*95/100].Microseconds())/1000, "p95-ms")
}

func (s *Store) benchQuery(r *rand.Rand) string {
	return strings.Join([]string{bench.vocab[wordIndex(r)], bench.vocab[wordIndex(r)], bench.vocab[r.IntN(benchVocab)]}, " ")
}

func BenchmarkVectorSearch(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 1))
	if _, err := s.VectorSearch(ctx, benchTenant, randomUnit(r, benchDims), 10, nil); err != nil { // loads the index
		b.Fatal(err)
	}
	var lat latency
	b.ResetTimer()
	for b.Loop() {
		q := randomUnit(r, benchDims)
		t0 := time.Now()
		hits, err := s.VectorSearch(ctx, benchTenant, q, 10, nil)
		lat = append(lat, time.Since(t0))
		if err != nil || len(hits) != 10 {
			b.Fatalf("%d hits, %v", len(hits), err)
		}
	}
	lat.report(b)
}

// BenchmarkVectorIndexLoad is a replica's first search of the large
// tenant: its 100,000 vectors read from PostgreSQL and indexed.
func BenchmarkVectorIndexLoad(b *testing.B) {
	benchStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(6, 6))
	for b.Loop() {
		s, err := Open(ctx, bench.dsn, Options{})
		if err != nil {
			b.Fatal(err)
		}
		hits, err := s.VectorSearch(ctx, benchTenant, randomUnit(r, benchDims), 10, nil)
		_ = s.Close()
		if err != nil || len(hits) != 10 {
			b.Fatalf("%d hits, %v", len(hits), err)
		}
	}
}

func BenchmarkKeywordSearch(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(2, 2))
	var lat latency
	found := 0
	for b.Loop() {
		q := s.benchQuery(r)
		t0 := time.Now()
		hits, err := s.KeywordSearch(ctx, benchTenant, q, 10, nil)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		found += len(hits)
	}
	if found == 0 {
		b.Fatal("no keyword query found anything")
	}
	lat.report(b)
}

func BenchmarkTraverse(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 3))
	var lat latency
	for b.Loop() {
		seeds := []string{bench.ids[r.IntN(benchEntities)], bench.ids[r.IntN(benchEntities)], bench.ids[r.IntN(benchEntities)]}
		t0 := time.Now()
		if _, err := s.Traverse(ctx, benchTenant, seeds, 2, 50); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b)
}

// BenchmarkHybrid is one recall's store work: vector and keyword search,
// then traversal from their best hits.
func BenchmarkHybrid(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(4, 4))
	if _, err := s.VectorSearch(ctx, benchTenant, randomUnit(r, benchDims), 10, nil); err != nil {
		b.Fatal(err)
	}
	var lat latency
	for b.Loop() {
		q, text := randomUnit(r, benchDims), s.benchQuery(r)
		t0 := time.Now()
		vh, err := s.VectorSearch(ctx, benchTenant, q, 10, nil)
		if err != nil {
			b.Fatal(err)
		}
		kh, err := s.KeywordSearch(ctx, benchTenant, text, 10, nil)
		if err != nil {
			b.Fatal(err)
		}
		var seeds []string
		for _, h := range append(vh[:min(3, len(vh))], kh[:min(3, len(kh))]...) {
			seeds = append(seeds, h.ID)
		}
		if _, err := s.Traverse(ctx, benchTenant, seeds, 2, 50); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b)
}

// BenchmarkCompleteEpisode completes episodes of five entities (two of
// them already known) and four relations, with one worker or four (as
// replicas would), the episodes of one tenant or of four.
func BenchmarkCompleteEpisode(b *testing.B) {
	for _, c := range []struct{ workers, tenants int }{{1, 1}, {4, 1}, {4, 4}} {
		workers := c.workers
		b.Run(fmt.Sprintf("workers=%d/tenants=%d", c.workers, c.tenants), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			run := time.Now().UnixNano()
			tenantOf := func(i int) string { return fmt.Sprintf("complete-%d-%d", run, i%c.tenants) }
			n := b.N
			eps := make([]*store.Episode, n)
			for i := range eps {
				ep, _, err := s.CreateEpisode(ctx, &store.Episode{ID: newID("ep_"), Tenant: tenantOf(i), Source: store.SourceRun,
					Content: "benchmark", CreatedAt: time.Now(), Status: store.StatusPending})
				if err != nil {
					b.Fatal(err)
				}
				eps[i] = ep
			}
			for claimed := 0; claimed < n; {
				got, err := s.ClaimEpisodes(ctx, "bench", n-claimed, time.Hour)
				if err != nil || len(got) == 0 {
					b.Fatalf("claim: %d, %v", len(got), err)
				}
				claimed += len(got)
			}
			r := rand.New(rand.NewPCG(5, uint64(workers*10+c.tenants)))
			results := make([]store.IngestResult, n)
			for i := range results {
				res := store.IngestResult{}
				for e := range 5 {
					name := fmt.Sprintf("Known %d", r.IntN(50))
					if e >= 2 {
						name = fmt.Sprintf("New %d %d", i, e)
					}
					res.Entities = append(res.Entities, store.ExtractedEntity{Name: name, Type: "concept",
						Summary: "from the benchmark", Embedding: randomUnit(r, benchDims)})
				}
				for rel := range 4 {
					res.Relations = append(res.Relations, store.ExtractedRelation{Source: rel, Target: rel + 1, Type: "relates_to", Confidence: 0.7})
				}
				results[i] = res
			}
			next := make(chan int, n)
			for i := range n {
				next <- i
			}
			close(next)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						if _, err := s.CompleteEpisode(ctx, eps[i].Tenant, eps[i].ID, "bench", results[i]); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "episodes/s")
		})
	}
}
