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
// as of the tenant's change sequence seq.
type tenantVectors struct {
	load sync.Mutex // one catch-up at a time

	mu     sync.RWMutex
	seq    int64
	loaded bool
	pos    map[string]int
	ids    []string
	types  []string
	vecs   [][]float32
	norms  []float32
	floats int64
}

func newTenantVectors() *tenantVectors {
	return &tenantVectors{pos: map[string]int{}}
}

// put adds or replaces one entity's vector; mu held.
func (t *tenantVectors) put(id, typ string, v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if i, ok := t.pos[id]; ok {
		t.floats += int64(len(v) - len(t.vecs[i]))
		t.types[i], t.vecs[i], t.norms[i] = typ, v, float32(math.Sqrt(n))
		return
	}
	t.pos[id] = len(t.ids)
	t.ids = append(t.ids, id)
	t.types = append(t.types, typ)
	t.vecs = append(t.vecs, v)
	t.norms = append(t.norms, float32(math.Sqrt(n)))
	t.floats += int64(len(v))
}

// remove drops one entity (swapping the last into its slot); mu held.
func (t *tenantVectors) remove(id string) {
	i, ok := t.pos[id]
	if !ok {
		return
	}
	t.floats -= int64(len(t.vecs[i]))
	last := len(t.ids) - 1
	if i != last {
		t.ids[i], t.types[i], t.vecs[i], t.norms[i] = t.ids[last], t.types[last], t.vecs[last], t.norms[last]
		t.pos[t.ids[i]] = i
	}
	t.ids, t.types, t.vecs, t.norms = t.ids[:last], t.types[:last], t.vecs[:last], t.norms[:last]
	delete(t.pos, id)
}

// hit is a candidate of a search.
type hit struct {
	i     int
	score float64
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
	qn = math.Sqrt(qn)
	t.mu.RLock()
	defer t.mu.RUnlock()
	h := make(minHeap, 0, k+1)
	for i, v := range t.vecs {
		if len(v) != len(q) || t.norms[i] == 0 {
			continue
		}
		if len(types) > 0 && !contains(types, t.types[i]) {
			continue
		}
		var dot float32
		for j, x := range v {
			dot += x * q[j]
		}
		sc := float64(dot) / (qn * float64(t.norms[i]))
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
		out[n] = store.Scored{ID: t.ids[x.i], Score: x.score}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, v := range ss {
		if v == s {
			return true
		}
	}
	return false
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
