// Package lru is the bounded least-recently-used cache of the services:
// their caches keyed by client input use it, so that memory stays bounded
// whatever clients send, and all evict the same way.
//
// It is bounded by entry count and, optionally, by a total cost (bytes);
// each entry may carry its own time to live. hashicorp/golang-lru has
// neither a cost bound nor per-entry expiry (its expirable LRU has one TTL
// per cache and a goroutine), which the context and tool-runner caches
// need, hence this small package.
package lru

import (
	"sync"
	"time"
)

// Options bounds a Cache.
type Options struct {
	// MaxEntries is the entry bound; below 1 it is 1.
	MaxEntries int
	// MaxCost bounds the total cost of the entries; 0 means no cost bound.
	MaxCost int64
	// Now is the clock of expiries; nil is time.Now.
	Now func() time.Time
}

// Cache is a bounded LRU map, safe for concurrent use. Beyond a bound the
// least recently used entries are evicted; the most recent one is kept even
// when it alone exceeds the cost bound, so a caller always finds what it
// has just stored. An expired entry is missing to every read and is removed
// when read or when RemoveExpired runs.
type Cache[K comparable, V any] struct {
	maxLen  int
	maxCost int64
	now     func() time.Time

	mu    sync.Mutex
	cost  int64
	items map[K]*entry[K, V]
	root  entry[K, V] // sentinel of the recency ring: root.next is the most recent
}

type entry[K comparable, V any] struct {
	prev, next *entry[K, V]
	key        K
	val        V
	cost       int64
	expires    time.Time // zero = never
}

// New returns an empty cache.
func New[K comparable, V any](o Options) *Cache[K, V] {
	c := &Cache[K, V]{maxLen: max(o.MaxEntries, 1), maxCost: o.MaxCost, now: o.Now, items: make(map[K]*entry[K, V])}
	if c.now == nil {
		c.now = time.Now
	}
	c.root.prev, c.root.next = &c.root, &c.root
	return c
}

// Get returns the value of k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	return c.get(k, true)
}

// Peek is Get without marking k used: the eviction order stays that of
// the writes.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	return c.get(k, false)
}

func (c *Cache[K, V]) get(k K, touch bool) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok || c.expiredLocked(e) {
		var zero V
		return zero, false
	}
	if touch {
		c.moveToFront(e)
	}
	return e.val, true
}

// Put stores v under k with a cost (0 when the cache has no cost bound) and
// a time to live (0 = none), as the most recently used entry, and evicts
// beyond the bounds.
func (c *Cache[K, V]) Put(k K, v V, cost int64, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var exp time.Time
	if ttl > 0 {
		exp = c.now().Add(ttl)
	}
	if e, ok := c.items[k]; ok {
		c.cost += cost - e.cost
		e.val, e.cost, e.expires = v, cost, exp
		c.moveToFront(e)
	} else {
		e := c.newEntryLocked()
		e.key, e.val, e.cost, e.expires = k, v, cost, exp
		c.pushFront(e)
		c.cost += cost
	}
	c.trimLocked()
}

// GetOrAdd returns the value of k, or stores and returns mk() (no cost, no
// expiry) when k is missing, atomically: two callers never make two values
// for one key.
func (c *Cache[K, V]) GetOrAdd(k K, mk func() V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok && !c.expiredLocked(e) {
		c.moveToFront(e)
		return e.val
	}
	v := mk()
	e := c.newEntryLocked()
	e.key, e.val = k, v
	c.pushFront(e)
	c.trimLocked()
	return v
}

// AddCost changes the cost of k, when present, by delta and evicts beyond
// the bounds. It does not mark k used.
func (c *Cache[K, V]) AddCost(k K, delta int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.cost += delta
		c.cost += delta
		c.trimLocked()
	}
}

// Remove deletes k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.removeLocked(e)
	}
}

// RemoveIf deletes every entry that matches and returns how many it
// deleted.
func (c *Cache[K, V]) RemoveIf(match func(K, V) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for e := c.root.prev; e != &c.root; {
		prev := e.prev
		if match(e.key, e.val) {
			c.removeLocked(e)
			n++
		}
		e = prev
	}
	return n
}

// RemoveExpired deletes the expired entries.
func (c *Cache[K, V]) RemoveExpired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for e := c.root.prev; e != &c.root; {
		prev := e.prev
		if !e.expires.IsZero() && !now.Before(e.expires) {
			c.removeLocked(e)
		}
		e = prev
	}
}

// Purge deletes every entry.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.items)
	c.root.prev, c.root.next = &c.root, &c.root
	c.cost = 0
}

// Len is the number of entries, expired ones included until removed.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// expiredLocked removes e and reports true when it has expired.
func (c *Cache[K, V]) expiredLocked(e *entry[K, V]) bool {
	if e.expires.IsZero() || c.now().Before(e.expires) {
		return false
	}
	c.removeLocked(e)
	return true
}

// trimLocked evicts from the least recent end until both bounds hold,
// keeping the most recent entry.
func (c *Cache[K, V]) trimLocked() {
	for len(c.items) > c.maxLen || (c.maxCost > 0 && c.cost > c.maxCost && len(c.items) > 1) {
		c.removeLocked(c.root.prev)
	}
}

// newEntryLocked returns a blank entry for a new key: when the cache is
// full, the least recently used one, evicted and reused, so that writes to
// a full cache allocate no entry.
func (c *Cache[K, V]) newEntryLocked() *entry[K, V] {
	if len(c.items) < c.maxLen {
		return &entry[K, V]{}
	}
	e := c.root.prev
	c.removeLocked(e)
	*e = entry[K, V]{}
	return e
}

func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	c.items[e.key] = e
	c.link(e)
}

func (c *Cache[K, V]) link(e *entry[K, V]) {
	e.prev, e.next = &c.root, c.root.next
	c.root.next.prev = e
	c.root.next = e
}

func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache[K, V]) moveToFront(e *entry[K, V]) {
	if c.root.next == e {
		return
	}
	c.unlink(e)
	c.link(e)
}

func (c *Cache[K, V]) removeLocked(e *entry[K, V]) {
	c.unlink(e)
	delete(c.items, e.key)
	c.cost -= e.cost
}
