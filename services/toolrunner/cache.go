package toolrunner

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/services/toolrunner/artifact"
)

// Defaults of the result cache (docs/concepts/idempotency.md): 10000
// entries, plus a byte bound, since one result may hold 50 KiB.
const (
	DefaultCacheEntries = 10_000
	DefaultCacheBytes   = 64 << 20
)

// cacheEntry is a stored result, without its tool_call_id.
type cacheEntry struct {
	owner  artifact.Owner
	result *baagentv1.ToolExecutionResult
	stored time.Time
}

// resultCache caches read-only tools' results by their derived key (the
// cache policies): a bounded LRU of results with a TTL per entry,
// on an injected clock. It is per replica: a cache, not a guarantee
// (exactly-once effects are the idempotency records' job). It also tracks calls in flight so that a
// duplicate arriving while the first runs waits for it instead of running
// twice. Safe for concurrent use.
type resultCache struct {
	now      func() time.Time
	maxBytes int
	entries  *lru.Cache[string, *cacheEntry] // cost: bytes

	mu       sync.Mutex // guards inflight; taken before the cache's own lock
	inflight map[string]chan struct{}
}

func newResultCache(now func() time.Time, maxEntries, maxBytes int) *resultCache {
	return &resultCache{
		now: now, maxBytes: maxBytes,
		entries:  lru.New[string, *cacheEntry](lru.Options{MaxEntries: maxEntries, MaxCost: int64(maxBytes), Now: now}),
		inflight: map[string]chan struct{}{},
	}
}

// acquire returns the cached entry under key, or, when there is none, a
// release function after becoming the one call in flight for key; a
// duplicate waits (bounded by ctx) for the call in flight and looks again.
func (c *resultCache) acquire(ctx context.Context, key string) (*cacheEntry, func(), error) {
	for {
		c.mu.Lock()
		if e, ok := c.entries.Get(key); ok {
			c.mu.Unlock()
			return e, nil, nil
		}
		wait, busy := c.inflight[key]
		if !busy {
			done := make(chan struct{})
			c.inflight[key] = done
			c.mu.Unlock()
			return nil, func() {
				c.mu.Lock()
				delete(c.inflight, key)
				c.mu.Unlock()
				close(done)
			}, nil
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// put stores a copy of r (without tool_call_id) under key for ttl. A result
// larger than the whole byte bound is not stored.
func (c *resultCache) put(key string, owner artifact.Owner, r *baagentv1.ToolExecutionResult, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	r = proto.Clone(r).(*baagentv1.ToolExecutionResult)
	r.ToolCallId = ""
	size := proto.Size(r) + len(key) + 128
	if size > c.maxBytes {
		return
	}
	c.entries.Put(key, &cacheEntry{owner: owner, result: r, stored: c.now()}, int64(size), ttl)
}

// sweep drops expired entries.
func (c *resultCache) sweep() { c.entries.RemoveExpired() }

// dropOwner removes a conversation's entries (its workspace is gone).
func (c *resultCache) dropOwner(o artifact.Owner) {
	c.entries.RemoveIf(func(_ string, e *cacheEntry) bool { return e.owner == o })
}
