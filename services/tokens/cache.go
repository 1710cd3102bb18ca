package tokens

import (
	"container/list"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultCacheEntries bounds the count cache: at about 150 bytes an entry,
// 64 Ki entries take about 10 MB and hold the messages of hundreds of
// conversations.
const DefaultCacheEntries = 64 << 10

// cacheKey identifies what was counted: a SHA-256 of the encoding name and
// the canonical bytes of a message or tool list. A cryptographic hash, not
// a fast 64-bit one, because a collision would silently return another
// message's count and tenants share the cache; hashing costs far less than
// encoding (see BenchmarkCountMessages).
type cacheKey [32]byte

// countCache is a bounded LRU map from content hash to raw token count. It
// is safe for concurrent use.
type countCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front = most recently used; values are *cacheEntry
	entries map[cacheKey]*list.Element

	hits, misses prometheus.Counter
}

type cacheEntry struct {
	key   cacheKey
	count int64
}

func newCountCache(max int, m *metrics) *countCache {
	return &countCache{max: max, order: list.New(), entries: make(map[cacheKey]*list.Element), hits: m.cacheHits, misses: m.cacheMisses}
}

// get returns the count stored under k and records a hit or a miss.
func (c *countCache) get(k cacheKey) (int64, bool) {
	c.mu.Lock()
	el, ok := c.entries[k]
	if ok {
		c.order.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Inc()
		return 0, false
	}
	c.hits.Inc()
	return el.Value.(*cacheEntry).count, true
}

// put stores count under k, evicting the least recently used entry when full.
func (c *countCache) put(k cacheKey, count int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value.(*cacheEntry).count = count
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, count: count})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key)
	}
}

func (c *countCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
