package tokens

import (
	"hash/maphash"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/lru"
)

// DefaultCacheEntries bounds the count cache: at about 150 bytes an entry,
// 64 Ki entries take about 10 MB and hold the messages of hundreds of
// conversations.
const DefaultCacheEntries = 64 << 10

// cacheKey identifies what was counted: two 64-bit hashes, under two
// independent random seeds, of the canonical bytes of a message or tool list
// and its encoding name.
//
// Why not SHA-256: hashing every message of a conversation is most of what a
// re-count costs, and SHA-256 made it half (BenchmarkRecount). Why 128 bits of
// a non-cryptographic hash are enough: a collision would return another
// message's count, so it must be neither likely by chance (about n²/2¹²⁹ for
// n cached entries) nor constructible by a client; the seeds are random per
// process and never leave it, and maphash is built to resist hash flooding by
// inputs chosen without knowing the seed.
type cacheKey [2]uint64

// keyer hashes canonical bytes to a cacheKey. It is immutable and safe for
// concurrent use.
type keyer struct{ seeds [2]maphash.Seed }

func newKeyer() keyer { return keyer{[2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}} }

func (k keyer) key(b []byte) cacheKey {
	return cacheKey{maphash.Bytes(k.seeds[0], b), maphash.Bytes(k.seeds[1], b)}
}

// countCache is a bounded LRU map from content hash to raw token count
// that records its hits and misses. It is safe for concurrent use.
type countCache struct {
	counts *lru.Cache[cacheKey, int64]
	keyer  keyer

	hits, misses prometheus.Counter
}

func newCountCache(max int, m *metrics) *countCache {
	return &countCache{counts: lru.New[cacheKey, int64](lru.Options{MaxEntries: max}), keyer: newKeyer(), hits: m.cacheHits, misses: m.cacheMisses}
}

// get returns the count stored under k and records a hit or a miss.
func (c *countCache) get(k cacheKey) (int64, bool) {
	count, ok := c.counts.Get(k)
	if !ok {
		c.misses.Inc()
		return 0, false
	}
	c.hits.Inc()
	return count, true
}

// put stores count under k, evicting the least recently used entry when full.
func (c *countCache) put(k cacheKey, count int64) { c.counts.Put(k, count, 0, 0) }

func (c *countCache) len() int { return c.counts.Len() }
