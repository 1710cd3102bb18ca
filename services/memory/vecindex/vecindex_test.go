package vecindex

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func randVec(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return normalise(v)
}

// topics is a set of topic centres; points around them have the shape of
// real embeddings: with noise 1 two points of a topic have a cosine of
// about 0.5, and random pairs about 0.
type topics [][]float32

const noise = 1.0

func newTopics(rng *rand.Rand, c, d int) topics {
	t := make(topics, c)
	for i := range t {
		t[i] = randVec(rng, d)
	}
	return t
}

func (t topics) points(rng *rand.Rand, n int) [][]float32 {
	d := len(t[0])
	out := make([][]float32, n)
	for i := range out {
		ctr := t[rng.IntN(len(t))]
		v := make([]float32, d)
		for j := range v {
			v[j] = ctr[j] + float32(noise*rng.NormFloat64()/math.Sqrt(float64(d)))
		}
		out[i] = normalise(v)
	}
	return out
}

// clustered returns n vectors around c topics.
func clustered(rng *rand.Rand, n, c, d int) [][]float32 {
	return newTopics(rng, c, d).points(rng, n)
}

// brute is the exact answer.
func brute(vecs map[string][]float32, types map[string]string, q []float32, k int, only []string) []Hit {
	q = normalise(q)
	var hs []Hit
	for id, v := range vecs {
		if len(only) > 0 && !slices.Contains(only, types[id]) {
			continue
		}
		hs = append(hs, Hit{ID: id, Score: float64(dot(v, q))})
	}
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].Score != hs[j].Score {
			return hs[i].Score > hs[j].Score
		}
		return hs[i].ID < hs[j].ID
	})
	if len(hs) > k {
		hs = hs[:k]
	}
	return hs
}

func hitIDs(hs []Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func TestExactMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	src := newMemSource()
	vecs, types := map[string][]float32{}, map[string]string{}
	for i := range 500 {
		id := fmt.Sprintf("en_%03d", i)
		v := randVec(rng, 16)
		typ := []string{"person", "place", "thing"}[i%3]
		vecs[id], types[id] = v, typ
		src.put(id, typ, v)
	}
	x := New(src, Options{Batch: 64})
	for range 50 {
		q := randVec(rng, 16)
		for _, only := range [][]string{nil, {"place"}, {"person", "thing"}} {
			got, err := x.Search(ctx, "t", q, 7, only)
			if err != nil {
				t.Fatal(err)
			}
			want := brute(vecs, types, q, 7, only)
			if !slices.Equal(hitIDs(got), hitIDs(want)) {
				t.Fatalf("Search(%v) = %v, want %v", only, hitIDs(got), hitIDs(want))
			}
			if math.Abs(got[0].Score-want[0].Score) > 1e-5 {
				t.Fatalf("score %v, want %v", got[0].Score, want[0].Score)
			}
		}
	}
	if got, _ := x.Search(ctx, "t", randVec(rng, 16), 5, []string{"unknown"}); len(got) != 0 {
		t.Fatalf("unknown type found %v", got)
	}
	if got, _ := x.Search(ctx, "t", make([]float32, 16), 5, nil); len(got) != 0 {
		t.Fatalf("zero query found %v", got)
	}
	if got, _ := x.Search(ctx, "t", randVec(rng, 8), 5, nil); len(got) != 0 {
		t.Fatalf("a query of other dimensions found %v", got)
	}
}

func TestIncrementalChanges(t *testing.T) {
	ctx := context.Background()
	src := newMemSource()
	x := New(src, Options{Batch: 2})
	e := func(i int) []float32 { v := make([]float32, 4); v[i] = 1; return v }
	src.put("a", "x", e(0))
	src.put("b", "x", e(1))
	src.put("c", "x", e(2))
	if got, _ := x.Search(ctx, "t", e(1), 1, nil); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("Search = %v, want b", got)
	}
	// Move b, delete c, add d: the next search sees all three.
	src.put("b", "x", e(3))
	src.del("c")
	src.put("d", "x", e(1))
	got, _ := x.Search(ctx, "t", e(1), 4, nil)
	if len(got) != 3 || got[0].ID != "d" || slices.Contains(hitIDs(got), "c") {
		t.Fatalf("after changes: %v", got)
	}
	if got, _ := x.Search(ctx, "t", e(3), 1, nil); got[0].ID != "b" || got[0].Score < 0.999 {
		t.Fatalf("moved vector: %v", got)
	}
	// A removal the source no longer remembers forces a reload.
	src.del("d")
	src.prune()
	src.put("e", "x", e(2))
	got, _ = x.Search(ctx, "t", e(1), 4, nil)
	if slices.Contains(hitIDs(got), "d") || !slices.Contains(hitIDs(got), "e") || len(got) != 3 {
		t.Fatalf("after a pruned removal: %v", got)
	}
	// An unchanged tenant is not read again.
	before := src.seqCall
	if _, err := x.Search(ctx, "t", e(1), 4, nil); err != nil {
		t.Fatal(err)
	}
	if src.seqCall != before+1 {
		t.Fatalf("Seq calls %d → %d", before, src.seqCall)
	}
}

func TestSwitchesBetweenExactAndIVF(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	src := newMemSource()
	x := New(src, Options{ExactBelow: 400})
	vs := clustered(rng, 1000, 20, 32)
	for i, v := range vs {
		src.put(fmt.Sprintf("v%d", i), "x", v)
	}
	if _, err := x.Search(ctx, "t", vs[0], 3, nil); err != nil {
		t.Fatal(err)
	}
	ti, _ := x.cache.Peek("t")
	if ti.centroids == nil || len(ti.lists) < 4 {
		t.Fatalf("1000 vectors over ExactBelow 400 are not an IVF: %d lists", len(ti.lists))
	}
	got, _ := x.Search(ctx, "t", vs[5], 1, nil)
	if len(got) != 1 || got[0].ID != "v5" {
		t.Fatalf("IVF search for a stored vector = %v", got)
	}
	for i := 0; i < 900; i++ {
		src.del(fmt.Sprintf("v%d", i))
	}
	got, _ = x.Search(ctx, "t", vs[950], 1, nil)
	if len(got) != 1 || got[0].ID != "v950" {
		t.Fatalf("after shrinking = %v", got)
	}
	if ti.centroids != nil || len(ti.where) != 100 {
		t.Fatalf("100 vectors still an IVF (%d lists, %d vectors)", len(ti.lists), len(ti.where))
	}
}

// TestApproximateRecall measures recall@10 of the IVF path against exact
// search on clustered vectors of embedding size.
func TestApproximateRecall(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	const n, d = 20000, 256
	src := newMemSource()
	vecs, types := map[string][]float32{}, map[string]string{}
	tp := newTopics(rng, 200, d)
	for i, v := range tp.points(rng, n) {
		id := fmt.Sprintf("en_%05d", i)
		vecs[id], types[id] = v, "x"
		src.put(id, "x", v)
	}
	x := New(src, Options{ExactBelow: 2000})
	queries := tp.points(rng, 100)
	if _, err := x.Search(ctx, "t", queries[0], 10, nil); err != nil {
		t.Fatal(err)
	}
	if ti, _ := x.cache.Peek("t"); ti.centroids == nil {
		t.Fatal("not an IVF")
	}
	found, total := 0, 0
	for _, q := range queries {
		got, err := x.Search(ctx, "t", q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := brute(vecs, types, q, 10, nil)
		for _, w := range want {
			if slices.Contains(hitIDs(got), w.ID) {
				found++
			}
		}
		total += len(want)
	}
	recall := float64(found) / float64(total)
	t.Logf("recall@10 = %.3f over %d vectors", recall, n)
	if recall < 0.95 {
		t.Fatalf("recall@10 = %.3f, want ≥ 0.95", recall)
	}
}

func TestByteBudgetEvicts(t *testing.T) {
	ctx := context.Background()
	src := newMemSource()
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 200 {
		src.put(fmt.Sprintf("v%d", i), "x", randVec(rng, 64))
	}
	x := New(src, Options{MaxBytes: 80_000})
	for _, tn := range []string{"t1", "t2", "t3"} {
		if got, err := x.Search(ctx, tn, randVec(rng, 64), 3, nil); err != nil || len(got) != 3 {
			t.Fatalf("Search(%s) = %v, %v", tn, got, err)
		}
	}
	if n := x.Stats().Tenants; n != 1 {
		t.Fatalf("%d tenants held within a budget for one", n)
	}
	if got, err := x.Search(ctx, "t1", randVec(rng, 64), 3, nil); err != nil || len(got) != 3 {
		t.Fatalf("an evicted tenant is not reloaded: %v, %v", got, err)
	}
}

func TestConcurrentSearchAndChange(t *testing.T) {
	ctx := context.Background()
	src := newMemSource()
	rng := rand.New(rand.NewPCG(9, 10))
	vs := clustered(rng, 600, 10, 16)
	for i, v := range vs[:300] {
		src.put(fmt.Sprintf("v%d", i), "x", v)
	}
	x := New(src, Options{ExactBelow: 200, Batch: 50})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if _, err := x.Search(ctx, "t", vs[(w*100+i)%600], 5, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i, v := range vs[300:] {
		src.put(fmt.Sprintf("v%d", 300+i), "x", v)
		if i%3 == 0 {
			src.del(fmt.Sprintf("v%d", i))
		}
	}
	wg.Wait()
	got, err := x.Search(ctx, "t", vs[599], 1, nil)
	if err != nil || len(got) != 1 || got[0].ID != "v599" {
		t.Fatalf("after concurrent changes: %v, %v", got, err)
	}
}

// BenchmarkSearch is one query over 100,000 vectors of 256 dimensions,
// exact and approximate.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	const n, d = 100_000, 256
	src := newMemSource()
	tp := newTopics(rng, 500, d)
	for i, v := range tp.points(rng, n) {
		src.put(fmt.Sprintf("en_%06d", i), "x", v)
	}
	queries := tp.points(rng, 256)
	for _, c := range []struct {
		name  string
		exact int
	}{{"ivf", 0}, {"exact", n + 1}} {
		b.Run(fmt.Sprintf("n=100k/d=256/%s", c.name), func(b *testing.B) {
			x := New(src, Options{ExactBelow: c.exact, MaxBytes: 1 << 30})
			if err := x.Refresh(ctx, "t"); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if _, err := x.Search(ctx, "t", queries[i%len(queries)], 10, nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(reg); err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	names := []string{"baagent_memory_vecindex_loads_total", "baagent_memory_vecindex_changes_total",
		"baagent_memory_vecindex_trainings_total", "baagent_memory_vecindex_search_seconds"}
	before := map[string]float64{}
	for _, n := range names {
		before[n] = counterValue(t, reg, n)
	}
	src := newMemSource()
	rng := rand.New(rand.NewPCG(13, 14))
	vs := clustered(rng, 300, 5, 16)
	for i, v := range vs {
		src.put(fmt.Sprintf("v%d", i), "x", v)
	}
	x := New(src, Options{ExactBelow: 100})
	y := New(src, Options{})
	if _, err := x.Search(ctx, "t", vs[0], 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Search(ctx, "t", vs[0], 3, nil); err != nil {
		t.Fatal(err)
	}
	src.put("new", "x", vs[1])
	if _, err := x.Search(ctx, "t", vs[0], 3, nil); err != nil {
		t.Fatal(err)
	}
	// Other tests may run in parallel: at least these.
	for n, want := range map[string]float64{names[0]: 2, names[1]: 1, names[2]: 1, names[3]: 3} {
		if got := counterValue(t, reg, n) - before[n]; got < want {
			t.Fatalf("%s rose by %v, want %v", n, got, want)
		}
	}
}

// counterValue is a counter's value, or a histogram's sample count summed
// over its series.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var v float64
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				v += c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				v += float64(h.GetSampleCount())
			}
		}
		return v
	}
	return 0
}
