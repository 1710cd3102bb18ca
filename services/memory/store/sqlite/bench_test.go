package sqlite

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/vecindex"
)

// The benchmark dataset: one tenant with 100,000 entities and about
// 200,000 relations, written through CompleteEpisode (episodes of eight new
// entities and two already known, sixteen relations), plus three other
// tenants of 5,000 entities each. Names, summaries and 256-dimensional
// embeddings (clustered by topic, as real embeddings are) are generated
// from a fixed seed. It is built once per benchmark process.

const (
	benchTenant   = "bench"
	benchEntities = 100_000
	benchDims     = 256
)

var (
	benchOnce  sync.Once
	benchPath  string
	benchErr   error
	benchIDs   []string    // a sample of the bench tenant's entity ids
	benchTopic [][]float32 // topic centres, for query vectors
)

var (
	firstNames = strings.Fields("Ada Bjorn Chiara Dmitri Elena Farid Grete Hiro Ines Jonas Kari Luca Maja Nils Olga Pedro Quinn Rania Sven Tove Ugo Vera Wim Xenia Yusuf Zofia")
	lastNames  = strings.Fields("Andersen Berg Costa Dahl Eriksen Fischer Garcia Hansen Ivanova Jensen Kowalski Larsen Moreau Nakamura Olsen Petrov Quist Rossi Schmidt Tanaka Ueda Vik Weber Xu Yilmaz Zhang")
	orgWords   = strings.Fields("Nordic Atlas Polar Fjord Harbor Granite Aurora Boreal Coastal Summit Beacon Meridian Vector Cobalt Solstice Tidal Evergreen Silver Iron Crystal")
	orgKinds   = strings.Fields("Logistics Pumps Analytics Shipping Energy Foods Robotics Textiles Software Insurance Mining Pharma Timber Salmon Solar Cables")
	suffixes   = strings.Fields("AS AB Ltd GmbH Inc SA Oy")
	products   = strings.Fields("pump valve sensor turbine gearbox router dashboard ledger invoice crane drone battery inverter compressor filter tracker")
	places     = strings.Fields("Oslo Bergen Stavanger Trondheim Tromso Gothenburg Malmo Aarhus Turku Tampere Reykjavik Hamburg Rotterdam Gdansk Tallinn Riga")
	verbs      = strings.Fields("supplies sells maintains builds audits finances insures ships designs operates")
	relTypes   = strings.Fields("WORKS_FOR SUPPLIES LOCATED_IN OWNS PARTNERS_WITH USES MANAGES SELLS_IN COMPETES_WITH REPORTS_TO")
	types      = strings.Fields("person organization product place project")
)

func pick(rng *rand.Rand, xs []string) string { return xs[rng.IntN(len(xs))] }

// genEntity makes the i-th entity: its topic decides its words and vector.
func genEntity(rng *rand.Rand, i int, topics [][]float32) store.ExtractedEntity {
	topic := rng.IntN(len(topics))
	trng := rand.New(rand.NewPCG(uint64(topic), 99)) // the topic's own vocabulary
	place, prod, kind := pick(trng, places), pick(trng, products), pick(trng, orgKinds)
	typ := types[i%len(types)]
	var name, summary string
	switch typ {
	case "person":
		name = fmt.Sprintf("%s %s %d", pick(rng, firstNames), pick(rng, lastNames), i)
		summary = fmt.Sprintf("%s is an engineer in %s who works on %s %s systems.", name, place, kind, prod)
	case "organization":
		name = fmt.Sprintf("%s %s %s %d", pick(rng, orgWords), kind, pick(rng, suffixes), i)
		summary = fmt.Sprintf("%s %s %s equipment from %s to customers across the region.", name, pick(rng, verbs), prod, place)
	case "product":
		name = fmt.Sprintf("%s %s %d", pick(rng, orgWords), prod, i)
		summary = fmt.Sprintf("A %s for %s made in %s.", prod, strings.ToLower(kind), place)
	case "place":
		name = fmt.Sprintf("%s %s site %d", place, pick(rng, orgWords), i)
		summary = fmt.Sprintf("An operations site near %s handling %s.", place, prod)
	default:
		name = fmt.Sprintf("Project %s %s %d", pick(rng, orgWords), prod, i)
		summary = fmt.Sprintf("A project in %s to replace the %s fleet of a %s company.", place, prod, strings.ToLower(kind))
	}
	v := make([]float32, benchDims)
	var n float64
	for j := range v {
		x := float64(topics[topic][j]) + rng.NormFloat64()/math.Sqrt(benchDims)
		v[j] = float32(x)
		n += x * x
	}
	for j := range v {
		v[j] = float32(float64(v[j]) / math.Sqrt(n))
	}
	return store.ExtractedEntity{Name: name, Type: typ, Summary: summary, Attributes: map[string]string{"city": place}, Embedding: v}
}

func genTopics(rng *rand.Rand, n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, benchDims)
		var s float64
		for j := range v {
			x := rng.NormFloat64()
			v[j] = float32(x)
			s += x * x
		}
		for j := range v {
			v[j] = float32(float64(v[j]) / math.Sqrt(s))
		}
		out[i] = v
	}
	return out
}

// fill writes entities for a tenant through CompleteEpisode.
func fill(ctx context.Context, s *Store, tenant string, entities int, rng *rand.Rand, topics [][]float32) error {
	var known []string
	made := 0
	for ep := 0; made < entities; ep++ {
		r := store.IngestResult{}
		for j := 0; j < 8 && made < entities; j++ {
			r.Entities = append(r.Entities, genEntity(rng, made, topics))
			made++
		}
		for j := 0; j < 2 && len(known) > 0; j++ {
			// (no name: the merge adds a mention, not an alias)
			r.Entities = append(r.Entities, store.ExtractedEntity{MergeInto: known[rng.IntN(len(known))]})
		}
		for j := 0; j < 16; j++ {
			a, b := rng.IntN(len(r.Entities)), rng.IntN(len(r.Entities))
			if a == b {
				b = (a + 1) % len(r.Entities)
			}
			if a == b {
				continue
			}
			r.Relations = append(r.Relations, store.ExtractedRelation{Source: a, Target: b, Type: pick(rng, relTypes),
				Fact: "fact", Confidence: 0.3 + 0.7*rng.Float64()})
		}
		id := fmt.Sprintf("ep_%s_%07d", tenant, ep)
		if _, _, err := s.CreateEpisode(ctx, &store.Episode{ID: id, Tenant: tenant, Source: store.SourceRun, Content: "run",
			ConversationID: fmt.Sprintf("conv_%d", ep/20), CreatedAt: time.Unix(1_700_000_000+int64(ep), 0)}); err != nil {
			return err
		}
		if _, err := s.ClaimEpisodes(ctx, "bench", 1, time.Hour); err != nil {
			return err
		}
		out, err := s.CompleteEpisode(ctx, tenant, id, "bench", r)
		if err != nil {
			return fmt.Errorf("episode %d: %w", ep, err)
		}
		known = append(known, out.CreatedIDs...)
	}
	return nil
}

// benchStore opens the dataset, building it when the temp dir does not
// hold it yet (a file named by its generator version, reused by later
// benchmark processes).
func benchStore(b *testing.B) *Store {
	b.Helper()
	benchOnce.Do(func() {
		ctx := context.Background()
		benchPath = filepath.Join(os.TempDir(), "baagent-memory-bench-v1.db")
		rng := rand.New(rand.NewPCG(2026, 27))
		benchTopic = genTopics(rng, 400)
		if s, err := Open(ctx, benchPath, Options{}); err == nil {
			st, err := s.Stats(ctx, benchTenant)
			if err == nil && st.Entities == benchEntities {
				benchErr = sampleIDs(ctx, s)
				_ = s.Close()
				return
			}
			_ = s.Close()
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(benchPath + suffix)
		}
		s, err := Open(ctx, benchPath, Options{})
		if err != nil {
			benchErr = err
			return
		}
		defer func() { _ = s.Close() }()
		start := time.Now()
		if benchErr = fill(ctx, s, benchTenant, benchEntities, rng, benchTopic); benchErr != nil {
			return
		}
		for i := range 3 {
			if benchErr = fill(ctx, s, fmt.Sprintf("other-%d", i), 5_000, rng, benchTopic); benchErr != nil {
				return
			}
		}
		st, _ := s.Stats(ctx, benchTenant)
		b.Logf("dataset: %d entities, %d relations, %d episodes in %s", st.Entities, st.Relations, st.Episodes, time.Since(start).Round(time.Second))
		benchErr = sampleIDs(ctx, s)
	})
	if benchErr != nil {
		b.Fatalf("dataset: %v", benchErr)
	}
	s, err := Open(context.Background(), benchPath, Options{Vectors: vectorOptions})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// sampleIDs keeps every hundredth entity id of the bench tenant.
func sampleIDs(ctx context.Context, s *Store) error {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM entities WHERE tenant = ? AND rid % 100 = 0 ORDER BY rid`, benchTenant)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		benchIDs = append(benchIDs, id)
	}
	return rows.Err()
}

var vectorOptions = vecindex.Options{MaxBytes: 1 << 30}

var benchQueries = []string{
	"who supplies pumps in Bergen", "salmon shipping Tromso", "solar inverter project", "Nordic Logistics AS",
	"engineer working on turbines", "robotics company in Gothenburg", "battery tracker", "Aurora Energy",
	"insurance for cranes", "pharma compressor Oslo", "timber crane drone", "coastal mining sensor",
}

// hybrid runs the three channels one after the other, as a hybrid search
// does: vector and keyword, then traversal from their best hits.
func hybrid(ctx context.Context, s *Store, q string, v []float32) error {
	vh, err := s.VectorSearch(ctx, benchTenant, v, 10, nil)
	if err != nil {
		return err
	}
	kh, err := s.KeywordSearch(ctx, benchTenant, q, 10, nil)
	if err != nil {
		return err
	}
	var seeds []string
	for i := 0; i < 3 && i < len(vh); i++ {
		seeds = append(seeds, vh[i].ID)
	}
	for i := 0; i < 2 && i < len(kh); i++ {
		seeds = append(seeds, kh[i].ID)
	}
	_, err = s.Traverse(ctx, benchTenant, seeds, 2, 10)
	return err
}

func BenchmarkSearch(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	qv := make([][]float32, 64)
	for i := range qv {
		qv[i] = genEntity(rng, i, benchTopic).Embedding
	}
	// Load and train the vector index outside the timings.
	if _, err := s.VectorSearch(ctx, benchTenant, qv[0], 10, nil); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, op func(i int) error) {
		var times []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if err := op(i); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
			i++
		}
		testkit.ReportPercentiles(b, times)
	}
	b.Run("channel=vector", func(b *testing.B) {
		run(b, func(i int) error {
			h, err := s.VectorSearch(ctx, benchTenant, qv[i%len(qv)], 10, nil)
			if err == nil && len(h) != 10 {
				err = fmt.Errorf("%d vector hits", len(h))
			}
			return err
		})
	})
	b.Run("channel=keyword", func(b *testing.B) {
		run(b, func(i int) error {
			h, err := s.KeywordSearch(ctx, benchTenant, benchQueries[i%len(benchQueries)], 10, nil)
			if err == nil && len(h) == 0 {
				err = fmt.Errorf("no keyword hits for %q", benchQueries[i%len(benchQueries)])
			}
			return err
		})
	})
	b.Run("channel=traverse-depth2", func(b *testing.B) {
		run(b, func(i int) error {
			seeds := []string{benchIDs[i%len(benchIDs)], benchIDs[(i*7+3)%len(benchIDs)], benchIDs[(i*13+5)%len(benchIDs)]}
			h, err := s.Traverse(ctx, benchTenant, seeds, 2, 10)
			if err == nil && len(h) == 0 {
				err = fmt.Errorf("no traversal hits")
			}
			return err
		})
	})
	b.Run("channel=hybrid", func(b *testing.B) {
		run(b, func(i int) error {
			return hybrid(ctx, s, benchQueries[i%len(benchQueries)], qv[i%len(qv)])
		})
	})
}

// BenchmarkCompleteEpisode is ingest throughput: episodes of five new
// entities and five relations, into a store of a few thousand entities.
func BenchmarkCompleteEpisode(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "ingest.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	rng := rand.New(rand.NewPCG(1, 1))
	topics := genTopics(rng, 50)
	if err := fill(ctx, s, "warm", 2_000, rng, topics); err != nil {
		b.Fatal(err)
	}
	results := make([]store.IngestResult, b.N)
	for i := range b.N {
		ep := fmt.Sprintf("ep_%08d", i)
		if _, _, err := s.CreateEpisode(ctx, &store.Episode{ID: ep, Tenant: "t", Source: store.SourceRun, Content: "run", CreatedAt: time.Unix(int64(i), 0)}); err != nil {
			b.Fatal(err)
		}
		r := store.IngestResult{}
		for j := range 5 {
			r.Entities = append(r.Entities, genEntity(rng, i*5+j, topics))
		}
		for j := range 5 {
			r.Relations = append(r.Relations, store.ExtractedRelation{Source: j, Target: (j + 1) % 5, Type: pick(rng, relTypes), Fact: "fact", Confidence: 0.7})
		}
		results[i] = r
	}
	for claimed := 0; claimed < b.N; {
		eps, err := s.ClaimEpisodes(ctx, "bench", 1000, time.Hour)
		if err != nil || len(eps) == 0 {
			b.Fatalf("claim: %d, %v", len(eps), err)
		}
		claimed += len(eps)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := s.CompleteEpisode(ctx, "t", fmt.Sprintf("ep_%08d", i), "bench", results[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "episodes/s")
}
