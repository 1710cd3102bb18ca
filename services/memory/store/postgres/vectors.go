package postgres

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/services/memory/store"
)

// vectorCache holds the tenants' in-process vector indexes, bounded in
// tenant count and total floats (least recently searched evicted).
type vectorCache struct {
	c *lru.Cache[string, *tenantVectors]
}

func newVectorCache(tenants int, budget int64) *vectorCache {
	return &vectorCache{c: lru.New[string, *tenantVectors](lru.Options{MaxEntries: tenants, MaxCost: budget})}
}

// tenantVectors is one tenant's exact (brute-force cosine) index, current
// as of the tenant's change sequence seq. Vectors are stored normalised and
// contiguously, one block per dimension count (one per embedding model in
// use), so a search is a run of dot products over one slice.
type tenantVectors struct {
	load sync.Mutex // one catch-up at a time

	mu     sync.RWMutex
	seq    int64
	loaded bool
	where  map[string]slot
	blocks map[int]*block
	types  map[string]int32 // type name → small id
	floats int64
}

// slot is where an entity's vector is.
type slot struct {
	dims int
	i    int
}

// block holds the vectors of one dimension count.
type block struct {
	dims  int
	ids   []string
	types []int32
	vecs  []float32 // len(ids) * dims, each normalised
}

func newTenantVectors() *tenantVectors {
	return &tenantVectors{where: map[string]slot{}, blocks: map[int]*block{}, types: map[string]int32{}}
}

func (t *tenantVectors) typeID(s string) int32 {
	id, ok := t.types[s]
	if !ok {
		id = int32(len(t.types))
		t.types[s] = id
	}
	return id
}

// put adds or replaces one entity's vector; mu held. A zero or non-finite
// vector is dropped.
func (t *tenantVectors) put(id, typ string, v []float32) {
	t.remove(id)
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return
	}
	inv := 1 / math.Sqrt(n)
	b := t.blocks[len(v)]
	if b == nil {
		b = &block{dims: len(v)}
		t.blocks[len(v)] = b
	}
	t.where[id] = slot{dims: len(v), i: len(b.ids)}
	b.ids = append(b.ids, id)
	b.types = append(b.types, t.typeID(typ))
	for _, x := range v {
		b.vecs = append(b.vecs, float32(float64(x)*inv))
	}
	t.floats += int64(len(v))
}

// remove drops one entity (moving the block's last vector into its slot);
// mu held.
func (t *tenantVectors) remove(id string) {
	at, ok := t.where[id]
	if !ok {
		return
	}
	delete(t.where, id)
	b := t.blocks[at.dims]
	last := len(b.ids) - 1
	if at.i != last {
		b.ids[at.i], b.types[at.i] = b.ids[last], b.types[last]
		copy(b.vecs[at.i*b.dims:(at.i+1)*b.dims], b.vecs[last*b.dims:])
		t.where[b.ids[at.i]] = slot{dims: b.dims, i: at.i}
	}
	b.ids, b.types, b.vecs = b.ids[:last], b.types[:last], b.vecs[:last*b.dims]
	t.floats -= int64(b.dims)
}

// len is the number of vectors held; mu held.
func (t *tenantVectors) len() int { return len(t.where) }

// hit is a candidate of a search.
type hit struct {
	i     int
	score float32
}

// minHeap keeps the best k hits with the worst on top.
type minHeap []hit

func (h minHeap) Len() int { return len(h) }
func (h minHeap) Less(a, b int) bool {
	if h[a].score != h[b].score {
		return h[a].score < h[b].score
	}
	return h[a].i > h[b].i
}
func (h minHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *minHeap) Push(x any)   { *h = append(*h, x.(hit)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dot is the dot product of two vectors of equal length, unrolled.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// search scores every vector of the query's length by cosine similarity
// and returns the best k, best first.
func (t *tenantVectors) search(q []float32, k int, types []string) []store.Scored {
	var qn float64
	for _, x := range q {
		qn += float64(x) * float64(x)
	}
	if qn == 0 || math.IsNaN(qn) || math.IsInf(qn, 0) {
		return nil
	}
	inv := 1 / math.Sqrt(qn)
	qv := make([]float32, len(q))
	for i, x := range q {
		qv[i] = float32(float64(x) * inv)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	b := t.blocks[len(q)]
	if b == nil {
		return nil
	}
	var allowed []bool
	if len(types) > 0 {
		allowed = make([]bool, len(t.types))
		some := false
		for _, name := range types {
			if id, ok := t.types[name]; ok {
				allowed[id], some = true, true
			}
		}
		if !some {
			return nil
		}
	}
	h := make(minHeap, 0, k+1)
	d := b.dims
	for i := range b.ids {
		if allowed != nil && !allowed[b.types[i]] {
			continue
		}
		sc := dot(qv, b.vecs[i*d:(i+1)*d])
		if len(h) < k {
			heap.Push(&h, hit{i, sc})
		} else if sc > h[0].score {
			h[0] = hit{i, sc}
			heap.Fix(&h, 0)
		}
	}
	out := make([]store.Scored, len(h))
	for n := len(h) - 1; n >= 0; n-- {
		x := heap.Pop(&h).(hit)
		out[n] = store.Scored{ID: b.ids[x.i], Score: float64(x.score)}
	}
	return out
}

// tenantIndex returns the tenant's vector index, brought up to the
// tenant's current change sequence: the first search loads every vector,
// later ones only what changed since (entities written, tombstones of
// entities deleted). Sequence numbers are handed out under the tenant
// row's lock and so commit in order: everything at or below the sequence
// read here is visible to the queries that follow.
func (s *Store) tenantIndex(ctx context.Context, tenant string) (*tenantVectors, error) {
	var cur int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM memory_tenants WHERE tenant = $1`, tenant).Scan(&cur)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	tv := s.vectors.c.GetOrAdd(tenant, newTenantVectors)
	tv.mu.RLock()
	fresh := tv.loaded && tv.seq >= cur
	tv.mu.RUnlock()
	if fresh {
		return tv, nil
	}
	tv.load.Lock()
	defer tv.load.Unlock()
	tv.mu.RLock()
	from, fresh := tv.seq, tv.loaded && tv.seq >= cur
	before := tv.floats
	tv.mu.RUnlock()
	if fresh {
		return tv, nil
	}
	start := time.Now()
	type row struct {
		id, typ string
		vec     []float32
	}
	var puts []row
	rows, err := s.pool.Query(ctx, `SELECT id, type, embedding FROM memory_entities
		WHERE tenant = $1 AND seq > $2 AND embedding IS NOT NULL`, tenant, from)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.typ, &r.vec); err != nil {
			rows.Close()
			return nil, err
		}
		puts = append(puts, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var gone []string
	if from > 0 {
		rows, err := s.pool.Query(ctx, `SELECT id FROM memory_entity_tombstones WHERE tenant = $1 AND seq > $2`, tenant, from)
		if err != nil {
			return nil, err
		}
		if gone, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, err
		}
	}
	tv.mu.Lock()
	for _, id := range gone {
		tv.remove(id)
	}
	for _, r := range puts {
		tv.put(r.id, r.typ, r.vec)
	}
	tv.seq, tv.loaded = cur, true
	delta := tv.floats - before
	tv.mu.Unlock()
	s.vectors.c.AddCost(tenant, delta)
	s.metrics.vectorsLoaded.Add(float64(len(puts)))
	s.metrics.vectorCatchup.Observe(time.Since(start).Seconds())
	return tv, nil
}
