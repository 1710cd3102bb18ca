package toolrunner

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
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
	key     string
	owner   artifact.Owner
	result  *baagentv1.ToolExecutionResult
	stored  time.Time
	expires time.Time
	size    int
}

// resultCache caches read-only tools' results by their derived key (the
// cache policies): a bounded LRU of results with a TTL per entry,
// on an injected clock. It is per replica: a cache, not a guarantee
// (exactly-once effects are the idempotency records' job). It also tracks calls in flight so that a
// duplicate arriving while the first runs waits for it instead of running
// twice. Safe for concurrent use.
type resultCache struct {
	now        func() time.Time
	maxEntries int
	maxBytes   int

	mu       sync.Mutex
	order    *list.List // front = most recently used; values are *cacheEntry
	entries  map[string]*list.Element
	bytes    int
	inflight map[string]chan struct{}
}

func newResultCache(now func() time.Time, maxEntries, maxBytes int) *resultCache {
	return &resultCache{
		now: now, maxEntries: maxEntries, maxBytes: maxBytes,
		order: list.New(), entries: map[string]*list.Element{}, inflight: map[string]chan struct{}{},
	}
}

// get returns the unexpired entry under key.
func (c *resultCache) get(key string) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(key)
}

func (c *resultCache) getLocked(key string) (*cacheEntry, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !c.now().Before(e.expires) {
		c.removeLocked(el)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e, true
}

// acquire returns the cached entry under key, or, when there is none, a
// release function after becoming the one call in flight for key; a
// duplicate waits (bounded by ctx) for the call in flight and looks again.
func (c *resultCache) acquire(ctx context.Context, key string) (*cacheEntry, func(), error) {
	for {
		c.mu.Lock()
		if e, ok := c.getLocked(key); ok {
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

// put stores a copy of r (without tool_call_id) under key for ttl.
func (c *resultCache) put(key string, owner artifact.Owner, r *baagentv1.ToolExecutionResult, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	r = proto.Clone(r).(*baagentv1.ToolExecutionResult)
	r.ToolCallId = ""
	now := c.now()
	e := &cacheEntry{key: key, owner: owner, result: r, stored: now, expires: now.Add(ttl), size: proto.Size(r) + len(key) + 128}
	if e.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.removeLocked(el)
	}
	c.entries[key] = c.order.PushFront(e)
	c.bytes += e.size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeLocked(c.order.Back())
	}
}

func (c *resultCache) removeLocked(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// sweep drops expired entries.
func (c *resultCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for el := c.order.Back(); el != nil; {
		prev := el.Prev()
		if !now.Before(el.Value.(*cacheEntry).expires) {
			c.removeLocked(el)
		}
		el = prev
	}
}

// dropOwner removes a conversation's entries (its workspace is gone).
func (c *resultCache) dropOwner(o artifact.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Back(); el != nil; {
		prev := el.Prev()
		if el.Value.(*cacheEntry).owner == o {
			c.removeLocked(el)
		}
		el = prev
	}
}

func (c *resultCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
