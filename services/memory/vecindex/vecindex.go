// Package vecindex is an in-process vector index of each tenant's entity
// embeddings, for stores whose database cannot search vectors itself (the
// SQLite store, and the PostgreSQL store without pgvector).
//
// A tenant's vectors are loaded from a Source on its first search and kept
// current incrementally: the store numbers every change of a tenant's
// vectors with a per-tenant, monotonically increasing sequence, and before
// each search the index asks for the tenant's current sequence and applies
// the changes after its own. Several replicas sharing one database thus see
// each other's writes at their next search.
//
// Up to ExactBelow vectors a search is exact (every vector scored). Above
// it the index is an IVF (inverted file): the vectors are partitioned by
// k-means around about √n centroids and a search scores the vectors of the
// lists whose centroids are nearest the query. Indexes are held in an LRU
// bounded by a byte budget across tenants.
package vecindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/internal/metrics"
)

// ErrTooOld is returned by Source.Changes when the history after since is
// no longer complete (deletions forgotten); the index then reloads the
// tenant from scratch.
var ErrTooOld = errors.New("vecindex: change history no longer reaches back that far")

// Change is one change of a tenant's vectors: an entity's vector set (Vec
// not empty) or removed (Vec empty).
type Change struct {
	Seq  int64
	ID   string
	Type string
	Vec  []float32
}

// Source is where the index reads a tenant's vectors.
type Source interface {
	// Seq is the tenant's current change sequence; 0 when it has none.
	Seq(ctx context.Context, tenant string) (int64, error)
	// Snapshot returns up to limit of the tenant's live vectors with an id
	// above afterID, in id order. A snapshot read page by page while the
	// tenant changes is made right by the changes after the sequence read
	// before its first page.
	Snapshot(ctx context.Context, tenant, afterID string, limit int) ([]Change, error)
	// Changes returns up to limit of the tenant's changes with a sequence
	// above since, removals included, in sequence order, and the sequence
	// the index is at once it has applied them (the last change's when
	// more follow, the tenant's current one when not). ErrTooOld when the
	// removals after since are no longer all kept.
	Changes(ctx context.Context, tenant string, since int64, limit int) (cs []Change, next int64, err error)
}

// Hit is a search result: an id with its cosine similarity to the query.
type Hit struct {
	ID    string
	Score float64
}

// Options tune an Index; zero values take the defaults.
type Options struct {
	// MaxBytes bounds the memory of all tenants' indexes (default 256 MiB);
	// the least recently searched tenants are dropped beyond it.
	MaxBytes int64
	// MaxTenants bounds the number of tenants held (default 10,000).
	MaxTenants int
	// ExactBelow is the size under which searches are exact (default 5,000).
	ExactBelow int
	// Probe is the fraction of the lists an approximate search scores
	// (default 1/16, at least 8 lists).
	Probe float64
	// Batch is the page size of Source.Changes (default 2,000).
	Batch int
}

// Index is the vector index of many tenants, safe for concurrent use.
type Index struct {
	src   Source
	o     Options
	cache *lru.Cache[string, *tenantIndex]
	mu    sync.Mutex // guards get-or-create of cache entries
}

// New returns an index reading src (its metrics: RegisterMetrics).
func New(src Source, o Options) *Index {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MaxTenants <= 0 {
		o.MaxTenants = 10_000
	}
	if o.ExactBelow <= 0 {
		o.ExactBelow = 5_000
	}
	if o.Probe <= 0 || o.Probe > 1 {
		o.Probe = 1.0 / 16
	}
	if o.Batch <= 0 {
		o.Batch = 2_000
	}
	return &Index{src: src, o: o, cache: lru.New[string, *tenantIndex](lru.Options{MaxEntries: o.MaxTenants, MaxCost: o.MaxBytes})}
}

// Stats describes what the index holds.
type Stats struct {
	Tenants int
}

// Stats reports the number of tenants held.
func (x *Index) Stats() Stats { return Stats{Tenants: x.cache.Len()} }

// Forget drops a tenant's index (it is reloaded by its next search).
func (x *Index) Forget(tenant string) { x.cache.Remove(tenant) }

func (x *Index) tenant(name string) *tenantIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t, ok := x.cache.Get(name); ok {
		return t
	}
	t := newTenantIndex()
	x.cache.Put(name, t, t.cost(), 0)
	return t
}

// Search returns the k vectors most similar to q (cosine), best first,
// restricted to the given types when types is not empty. The tenant's
// index is brought up to date first.
func (x *Index) Search(ctx context.Context, tenant string, q []float32, k int, types []string) ([]Hit, error) {
	if k <= 0 || len(q) == 0 {
		return nil, nil
	}
	qn := normalise(q)
	if qn == nil {
		return nil, nil
	}
	t := x.tenant(tenant)
	if err := x.refresh(ctx, tenant, t); err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	start := time.Now()
	hits := t.search(qn, k, types, x.o.Probe)
	path := "exact"
	if t.centroids != nil {
		path = "ivf"
	}
	metrics.Observe(ctx, searchSeconds.WithLabelValues(path), time.Since(start).Seconds())
	return hits, nil
}

// Refresh brings a tenant's index up to date without searching (a warm-up).
func (x *Index) Refresh(ctx context.Context, tenant string) error {
	return x.refresh(ctx, tenant, x.tenant(tenant))
}

func (x *Index) refresh(ctx context.Context, tenant string, t *tenantIndex) error {
	cur, err := x.src.Seq(ctx, tenant)
	if err != nil {
		return fmt.Errorf("vecindex: %w", err)
	}
	t.mu.RLock()
	fresh := t.loaded && t.seq >= cur
	t.mu.RUnlock()
	if fresh {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for reloads := 0; !t.loaded || t.seq < cur; {
		if !t.loaded {
			if err := x.load(ctx, tenant, t); err != nil {
				return err
			}
			continue
		}
		cs, next, err := x.src.Changes(ctx, tenant, t.seq, x.o.Batch)
		if errors.Is(err, ErrTooOld) && reloads < 3 {
			reloads++
			t.reset()
			continue
		}
		if err != nil {
			return fmt.Errorf("vecindex: %w", err)
		}
		for _, c := range cs {
			t.apply(c)
		}
		changesTotal.Add(float64(len(cs)))
		if next <= t.seq {
			break // nothing newer is visible (yet)
		}
		t.seq = next
	}
	if t.maintain(x.o.ExactBelow) {
		trainingsTotal.Inc()
	}
	x.cache.Put(tenant, t, t.cost(), 0)
	return nil
}

// load reads a tenant's live vectors page by page.
func (x *Index) load(ctx context.Context, tenant string, t *tenantIndex) error {
	seq, err := x.src.Seq(ctx, tenant)
	if err != nil {
		return fmt.Errorf("vecindex: %w", err)
	}
	after := ""
	for {
		cs, err := x.src.Snapshot(ctx, tenant, after, x.o.Batch)
		if err != nil {
			t.reset()
			return fmt.Errorf("vecindex: %w", err)
		}
		for _, c := range cs {
			t.apply(c)
		}
		if len(cs) < x.o.Batch {
			break
		}
		after = cs[len(cs)-1].ID
	}
	t.loaded, t.seq = true, seq
	loadsTotal.Inc()
	return nil
}

func normalise(q []float32) []float32 {
	var n float64
	for _, v := range q {
		n += float64(v) * float64(v)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return nil
	}
	inv := 1 / math.Sqrt(n)
	out := make([]float32, len(q))
	for i, v := range q {
		out[i] = float32(float64(v) * inv)
	}
	return out
}
