package skills

import (
	"sync"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/lru"
)

// maxCatalogCache bounds the catalog cache; its keys come from requests.
const maxCatalogCache = 256

// catalogKey identifies a rendered catalog: the same snapshot, view, model
// and budget always render the same text.
type catalogKey struct {
	gen             uint64
	tenant, project string
	model           string
	budget          int64
}

// catalogCache keeps recent catalogs so that the per-step GetCatalog of a
// run costs no token-counting round trip: an LRU that only holds entries of
// the newest snapshot generation.
type catalogCache struct {
	mu      sync.Mutex // guards gen, so that a put of an older one cannot follow a purge
	gen     uint64
	entries *lru.Cache[catalogKey, *baagentv1.GetCatalogResponse]
}

func newCatalogCache() *catalogCache {
	return &catalogCache{entries: lru.New[catalogKey, *baagentv1.GetCatalogResponse](lru.Options{MaxEntries: maxCatalogCache})}
}

// get returns a copy of the cached response for k, or nil.
func (c *catalogCache) get(k catalogKey) *baagentv1.GetCatalogResponse {
	r, ok := c.entries.Get(k)
	if !ok {
		return nil
	}
	return copyCatalog(r)
}

func (c *catalogCache) put(k catalogKey, r *baagentv1.GetCatalogResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case k.gen < c.gen:
		return // rendered from a snapshot already replaced
	case k.gen > c.gen:
		c.entries.Purge()
		c.gen = k.gen
	}
	c.entries.Put(k, copyCatalog(r), 0, 0)
}

// copyCatalog copies a response so that neither the cache nor a caller can
// change the other's (the text itself is an immutable string).
func copyCatalog(r *baagentv1.GetCatalogResponse) *baagentv1.GetCatalogResponse {
	return &baagentv1.GetCatalogResponse{
		Text:           r.GetText(),
		Tokens:         r.GetTokens(),
		SkillCount:     r.GetSkillCount(),
		ShortenedCount: r.GetShortenedCount(),
		NameOnlyCount:  r.GetNameOnlyCount(),
	}
}
