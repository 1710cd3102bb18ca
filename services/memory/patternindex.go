package memory

import (
	"cmp"
	"container/list"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// The pattern index keeps, per tenant, the scoring heads of its patterns
// (own and granted: the fields PatternCandidates reads) in process, so
// that MatchPatterns filters and scores them without reading them from the
// store each time. It is kept fresh incrementally: every MatchPatterns
// first asks the store for the heads changed since the last read
// (store.PatternStore.PatternHeads) less a margin, and merges them by id,
// the newer version winning. A tenant is read whole on its first match;
// after that the server's background reloader (Server.Run) reads each
// held tenant whole again once its last whole read is older than
// FullReload, off the request path, which also drops deleted patterns and
// revoked grants (and lets a tenant that had too many heads back in).
// Without the reloader (a Server never Run), a match reads the tenant
// whole itself once that is three times as old. Between two whole reads,
// a deleted or revoked pattern can still be scored: reading the winners
// whole (GetPatterns) leaves it out, and MatchPatterns then drops it and
// ranks again.

// Defaults of PatternIndexOptions.
const (
	DefaultPatternIndexHeads      = 200_000
	DefaultPatternIndexMargin     = 30 * time.Second
	DefaultPatternIndexFullReload = 5 * time.Minute
)

// PatternIndexOptions bound the in-process index of pattern scoring heads.
type PatternIndexOptions struct {
	// MaxHeads bounds the heads held over all tenants (each tenant counts
	// one more); least recently matched tenants are dropped beyond it,
	// and a tenant with more is matched from the store directly (default
	// 200,000, about 100 MB). Negative disables the index.
	MaxHeads int
	// Margin is subtracted from the time of the last read when asking
	// for what changed since: writes stamped by a replica whose clock is
	// behind, or committed late, within it are still seen (default 30s).
	Margin time.Duration
	// FullReload is how old a tenant's last whole read may be before the
	// next match reads it whole again (default 5m).
	FullReload time.Duration
}

func (o PatternIndexOptions) withDefaults() PatternIndexOptions {
	if o.MaxHeads == 0 {
		o.MaxHeads = DefaultPatternIndexHeads
	}
	if o.Margin <= 0 {
		o.Margin = DefaultPatternIndexMargin
	}
	if o.FullReload <= 0 {
		o.FullReload = DefaultPatternIndexFullReload
	}
	return o
}

// Results of an index lookup, the values of
// baagent_memory_pattern_index_lookups_total{result}.
const (
	indexHit    = "hit"    // served from the held heads after a read of the changes
	indexReload = "reload" // the tenant was read whole first (not held, or FullReload passed)
	indexBypass = "bypass" // the tenant has more heads than the index holds: read from the store
)

// headKey identifies a head: a granted pattern is its owner's.
type headKey struct{ owner, id string }

// head is one pattern's scoring fields and its entities as candidates
// match them (lower-cased).
type head struct {
	rec  store.PatternRecord
	keys []string
}

// tenantHeads are one tenant's heads.
type tenantHeads struct {
	tenant string
	elem   *list.Element // in patternIndex.lru; nil once evicted
	cost   int           // counted in patternIndex.held

	// load admits one loader at a time.
	load chan struct{}

	mu    sync.RWMutex
	heads map[headKey]*head
	// byTask and byEntity index heads by task type and by entity key:
	// candidates are a few of these sets, not a walk of every head.
	byTask, byEntity map[string]map[headKey]*head
	// held: heads holds the tenant's (a whole read was done and fitted).
	held bool
	// tooMany: the last whole read found more heads than the index holds.
	tooMany bool
	// fullAt and lastStart are wall-clock times (time.Now) of the last
	// whole read and of the start of the last read (whole or changes);
	// since is the next read's lower bound in the service's clock.
	fullAt, lastStart time.Time
	since             time.Time
}

// patternIndex holds the tenants' heads, least recently matched evicted
// first.
type patternIndex struct {
	o   PatternIndexOptions
	st  store.PatternStore
	m   *metrics
	now func() time.Time // the service's clock: the time patterns are stamped with

	mu      sync.Mutex
	tenants map[string]*tenantHeads
	lru     *list.List // of *tenantHeads, most recent first
	held    int
}

func newPatternIndex(o PatternIndexOptions, st store.PatternStore, m *metrics, now func() time.Time) *patternIndex {
	return &patternIndex{o: o.withDefaults(), st: st, m: m, now: now, tenants: make(map[string]*tenantHeads), lru: list.New()}
}

// enabled reports whether the index serves candidates.
func (x *patternIndex) enabled() bool { return x != nil && x.o.MaxHeads > 0 }

// entry returns the tenant's entry, created when missing, as the most
// recently used.
func (x *patternIndex) entry(tenant string) *tenantHeads {
	x.mu.Lock()
	defer x.mu.Unlock()
	t, ok := x.tenants[tenant]
	if ok {
		x.lru.MoveToFront(t.elem)
		return t
	}
	t = &tenantHeads{tenant: tenant, load: make(chan struct{}, 1), cost: 1}
	t.reset(0)
	t.elem = x.lru.PushFront(t)
	x.tenants[tenant] = t
	x.held++
	x.evictLocked(t)
	x.m.patternIndexHeads.Set(float64(x.held))
	return t
}

// resize records the tenant's new number of heads and evicts others
// beyond the cap.
func (x *patternIndex) resize(t *tenantHeads, n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t.elem == nil {
		return // evicted meanwhile: no longer counted
	}
	x.held += n + 1 - t.cost
	t.cost = n + 1
	x.evictLocked(t)
	x.m.patternIndexHeads.Set(float64(x.held))
}

// evictLocked drops least recently used tenants other than keep while
// more heads than the cap are held.
func (x *patternIndex) evictLocked(keep *tenantHeads) {
	for x.held > x.o.MaxHeads {
		e := x.lru.Back()
		if e == nil {
			return
		}
		t := e.Value.(*tenantHeads)
		if t == keep {
			if e = e.Prev(); e == nil {
				return
			}
			t = e.Value.(*tenantHeads)
		}
		x.lru.Remove(e)
		delete(x.tenants, t.tenant)
		x.held -= t.cost
		t.elem = nil
		x.m.patternIndexEvictions.Inc()
	}
}

// candidates returns what the store's PatternCandidates would: copies of
// the heads of the tenant's patterns (own and granted) of the task type
// or sharing one of entities, at most limit, most recently updated first.
// ok is false when the index does not serve the tenant (disabled, or too
// many heads); the caller then asks the store.
func (x *patternIndex) candidates(ctx context.Context, tenant, taskType string, entities []string, limit int) (out []*store.PatternRecord, ok bool, err error) {
	if !x.enabled() || limit <= 0 {
		return nil, false, nil
	}
	t := x.entry(tenant)
	result, err := x.refresh(ctx, t)
	if err != nil {
		return nil, false, err
	}
	x.m.patternIndexLookups.WithLabelValues(result).Inc()
	if result == indexBypass {
		return nil, false, nil
	}
	want := make(map[string]struct{}, len(entities))
	for _, e := range entities {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			want[e] = struct{}{}
		}
	}
	t.mu.RLock()
	of := t.byTask[taskType]
	picked := make([]*head, 0, len(of)+16)
	for _, h := range of {
		picked = append(picked, h)
	}
	var also map[headKey]bool
	for e := range want {
		for k, h := range t.byEntity[e] {
			if h.rec.Signature.TaskType == taskType || also[k] {
				continue
			}
			if also == nil {
				also = make(map[headKey]bool)
			}
			also[k] = true
			picked = append(picked, h)
		}
	}
	// Copied under the lock: touches write the held heads.
	slices.SortFunc(picked, func(a, b *head) int {
		if c := b.rec.UpdatedAt.Compare(a.rec.UpdatedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(b.rec.ID, a.rec.ID); c != 0 {
			return c
		}
		return cmp.Compare(b.rec.Tenant, a.rec.Tenant)
	})
	picked = picked[:min(len(picked), limit)]
	recs := make([]store.PatternRecord, len(picked))
	for i, h := range picked {
		recs[i] = h.rec
	}
	t.mu.RUnlock()
	out = make([]*store.PatternRecord, len(recs))
	for i := range recs {
		out[i] = &recs[i]
	}
	return out, true, nil
}

// reset empties the tenant's heads; the caller holds t.mu (or is the
// only one to see t).
func (t *tenantHeads) reset(n int) {
	t.heads = make(map[headKey]*head, n)
	t.byTask = make(map[string]map[headKey]*head)
	t.byEntity = make(map[string]map[headKey]*head)
}

// put sets a head, replacing the one of its key; the caller holds t.mu.
func (t *tenantHeads) put(k headKey, h *head) {
	t.del(k)
	t.heads[k] = h
	link(t.byTask, h.rec.Signature.TaskType, k, h)
	for _, e := range h.keys {
		link(t.byEntity, e, k, h)
	}
}

// del removes a head; the caller holds t.mu.
func (t *tenantHeads) del(k headKey) {
	old, ok := t.heads[k]
	if !ok {
		return
	}
	delete(t.heads, k)
	unlink(t.byTask, old.rec.Signature.TaskType, k)
	for _, e := range old.keys {
		unlink(t.byEntity, e, k)
	}
}

func link(m map[string]map[headKey]*head, v string, k headKey, h *head) {
	set := m[v]
	if set == nil {
		set = make(map[headKey]*head)
		m[v] = set
	}
	set[k] = h
}

func unlink(m map[string]map[headKey]*head, v string, k headKey) {
	if set := m[v]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(m, v)
		}
	}
}

// refresh brings the tenant's heads up to date: read whole when not held
// or FullReload has passed, otherwise the changes since the last read.
// One loader at a time; a caller that waited for another's read begun
// after it arrived takes that read's result.
func (x *patternIndex) refresh(ctx context.Context, t *tenantHeads) (string, error) {
	arrived := time.Now()
	select {
	case t.load <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-t.load }()
	t.mu.RLock()
	held, tooMany, fullAt, lastStart, since := t.held, t.tooMany, t.fullAt, t.lastStart, t.since
	t.mu.RUnlock()
	whole := (!held && !tooMany) || time.Since(fullAt) >= staleAfter*x.o.FullReload
	if !whole && lastStart.After(arrived) {
		// Another caller's read began after this one arrived.
		if tooMany {
			return indexBypass, nil
		}
		return indexHit, nil
	}
	if !whole && tooMany {
		return indexBypass, nil
	}
	start, stamp := time.Now(), x.now().UTC()
	if whole {
		return x.loadWhole(ctx, t, start, stamp)
	}
	rs, err := x.st.PatternHeads(ctx, t.tenant, since, x.o.MaxHeads)
	if err != nil {
		return "", err
	}
	if len(rs) > x.tenantHeads() {
		// More changed than the index holds: read the tenant again
		// (which then bypasses the index).
		return x.loadWhole(ctx, t, start, stamp)
	}
	t.mu.Lock()
	for _, r := range rs {
		k := headKey{r.Tenant, r.ID}
		if old, ok := t.heads[k]; ok {
			if old.rec.Version > r.Version {
				continue
			}
			if old.rec.LastQueriedAt.After(r.LastQueriedAt) {
				// A touch through this replica the read does not show yet.
				r.LastQueriedAt = old.rec.LastQueriedAt
			}
		}
		t.put(k, newHead(r))
	}
	n := len(t.heads)
	t.lastStart, t.since = start, stamp.Add(-x.o.Margin)
	t.mu.Unlock()
	x.resize(t, n)
	return indexHit, nil
}

// staleAfter × FullReload is how old a whole read may grow before a match
// reads the tenant whole itself (the background reloader not running).
const staleAfter = 3

// reloadDue reads whole again, one after the other, the held tenants (and
// those with too many heads) whose last whole read is older than
// FullReload. It returns the number read and stops at ctx's end.
func (x *patternIndex) reloadDue(ctx context.Context) (int, error) {
	if !x.enabled() {
		return 0, nil
	}
	x.mu.Lock()
	due := make([]*tenantHeads, 0, len(x.tenants))
	for _, t := range x.tenants {
		due = append(due, t)
	}
	x.mu.Unlock()
	n := 0
	for _, t := range due {
		t.mu.RLock()
		stale := (t.held || t.tooMany) && time.Since(t.fullAt) >= x.o.FullReload
		t.mu.RUnlock()
		if !stale || x.evicted(t) {
			continue
		}
		select {
		case t.load <- struct{}{}:
		case <-ctx.Done():
			return n, ctx.Err()
		}
		_, err := x.loadWhole(ctx, t, time.Now(), x.now().UTC())
		<-t.load
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// evicted reports whether t left the index.
func (x *patternIndex) evicted(t *tenantHeads) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return t.elem == nil
}

// tenantHeads is the most heads one tenant may have in the index: with
// the one its entry counts, the cap.
func (x *patternIndex) tenantHeads() int { return x.o.MaxHeads - 1 }

// loadWhole reads all the tenant's heads; the caller holds t.load.
func (x *patternIndex) loadWhole(ctx context.Context, t *tenantHeads, start, stamp time.Time) (string, error) {
	rs, err := x.st.PatternHeads(ctx, t.tenant, time.Time{}, x.o.MaxHeads)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	t.fullAt, t.lastStart, t.since = start, start, stamp.Add(-x.o.Margin)
	if len(rs) > x.tenantHeads() {
		t.reset(0)
		t.held, t.tooMany = false, true
		t.mu.Unlock()
		x.resize(t, 0)
		return indexBypass, nil
	}
	old := t.heads
	t.reset(len(rs))
	for _, r := range rs {
		k := headKey{r.Tenant, r.ID}
		if o, ok := old[k]; ok && o.rec.Version == r.Version && o.rec.LastQueriedAt.After(r.LastQueriedAt) {
			r.LastQueriedAt = o.rec.LastQueriedAt
		}
		t.put(k, newHead(r))
	}
	t.held, t.tooMany = true, false
	t.mu.Unlock()
	x.resize(t, len(rs))
	return indexReload, nil
}

func newHead(r *store.PatternRecord) *head {
	h := &head{rec: *r, keys: r.Entities}
	cloned := false
	for i, e := range r.Entities {
		if k := strings.ToLower(strings.TrimSpace(e)); k != e {
			if !cloned {
				h.keys, cloned = slices.Clone(r.Entities), true
			}
			h.keys[i] = k
		}
	}
	return h
}

// touched records that the tenant's own patterns ids were queried at.
func (x *patternIndex) touched(tenant string, ids []string, at time.Time) {
	t := x.lookup(tenant)
	if t == nil || len(ids) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if h, ok := t.heads[headKey{tenant, id}]; ok && at.After(h.rec.LastQueriedAt) {
			h.rec.LastQueriedAt = at
		}
	}
}

// forget drops heads the store no longer shows the tenant (deleted, or
// their grant revoked).
func (x *patternIndex) forget(tenant string, keys []headKey) {
	t := x.lookup(tenant)
	if t == nil || len(keys) == 0 {
		return
	}
	t.mu.Lock()
	for _, k := range keys {
		t.del(k)
	}
	n := len(t.heads)
	t.mu.Unlock()
	x.resize(t, n)
}

// lookup returns the tenant's entry when held, without changing its use.
func (x *patternIndex) lookup(tenant string) *tenantHeads {
	if !x.enabled() {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tenants[tenant]
}

// stats returns how many tenants and heads are held (tests).
func (x *patternIndex) stats() (tenants, heads int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.tenants), x.held - len(x.tenants)
}

// runPatternIndexReload reads the held tenants whole again as their last
// whole read passes FullReload, checking every fifth of it, until ctx
// ends, so that matches only read what changed.
func (s *Server) runPatternIndexReload(ctx context.Context) error {
	tick := time.NewTicker(max(s.patternIndex.o.FullReload/5, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		n, err := s.patternIndex.reloadDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "memory: pattern index not reloaded", "reloaded", n, "err", err)
		}
	}
}
