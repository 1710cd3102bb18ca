package contextsvc

import (
	"container/list"
	"sync"
	"time"
)

// lru is a bounded least-recently-used cache, safe for concurrent use. It is
// bounded by entry count and, optionally, by a total cost (bytes); entries may
// also carry an expiry. Every cache of the service that is keyed by client
// input is one of these, so memory stays bounded whatever clients send.
type lru[K comparable, V any] struct {
	mu        sync.Mutex
	maxLen    int
	maxCost   int64 // 0 = no cost bound
	cost      int64
	ll        *list.List
	items     map[K]*list.Element
	now       func() time.Time
	onEvict   func(K, V)
	evictions int64
}

type lruEntry[K comparable, V any] struct {
	key     K
	val     V
	cost    int64
	expires time.Time // zero = never
}

func newLRU[K comparable, V any](maxLen int, maxCost int64, now func() time.Time) *lru[K, V] {
	if maxLen < 1 {
		maxLen = 1
	}
	if now == nil {
		now = time.Now
	}
	return &lru[K, V]{maxLen: maxLen, maxCost: maxCost, ll: list.New(), items: make(map[K]*list.Element), now: now}
}

// get returns the value of k and marks it recently used; an expired entry is
// removed and reported missing.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*lruEntry[K, V])
	if !e.expires.IsZero() && !c.now().Before(e.expires) {
		c.removeElement(el)
		var zero V
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// put stores v under k with a cost and an optional time to live (0 = none),
// evicting the least recently used entries beyond the bounds.
func (c *lru[K, V]) put(k K, v V, cost int64, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var exp time.Time
	if ttl > 0 {
		exp = c.now().Add(ttl)
	}
	if el, ok := c.items[k]; ok {
		e := el.Value.(*lruEntry[K, V])
		c.cost += cost - e.cost
		e.val, e.cost, e.expires = v, cost, exp
		c.ll.MoveToFront(el)
	} else {
		c.items[k] = c.ll.PushFront(&lruEntry[K, V]{key: k, val: v, cost: cost, expires: exp})
		c.cost += cost
	}
	c.trim()
}

// getOrAdd returns the value of k, or stores and returns mk() when k is
// missing (atomically, so two callers never create two values for one key).
func (c *lru[K, V]) getOrAdd(k K, mk func() V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		e := el.Value.(*lruEntry[K, V])
		if e.expires.IsZero() || c.now().Before(e.expires) {
			c.ll.MoveToFront(el)
			return e.val
		}
		c.removeElement(el)
	}
	v := mk()
	c.items[k] = c.ll.PushFront(&lruEntry[K, V]{key: k, val: v})
	c.trim()
	return v
}

// addCost changes the cost of k (when present) and evicts beyond the bound.
func (c *lru[K, V]) addCost(k K, delta int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		el.Value.(*lruEntry[K, V]).cost += delta
		c.cost += delta
		c.trim()
	}
}

// remove deletes k.
func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.removeElement(el)
	}
}

// removeIf deletes every entry that matches.
func (c *lru[K, V]) removeIf(match func(K, V) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for el := c.ll.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*lruEntry[K, V]); match(e.key, e.val) {
			c.removeElement(el)
			n++
		}
		el = next
	}
	return n
}

func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// trim evicts from the back until both bounds hold; the most recent entry is
// kept even when it alone exceeds the cost bound, so a caller always finds
// what it just stored.
func (c *lru[K, V]) trim() {
	for c.ll.Len() > c.maxLen || (c.maxCost > 0 && c.cost > c.maxCost && c.ll.Len() > 1) {
		c.removeElement(c.ll.Back())
	}
}

func (c *lru[K, V]) removeElement(el *list.Element) {
	e := el.Value.(*lruEntry[K, V])
	c.ll.Remove(el)
	delete(c.items, e.key)
	c.cost -= e.cost
}
