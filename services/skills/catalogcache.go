package skills

import (
	"sync"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
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
// run costs no token-counting round trip. It only holds entries of the
// newest snapshot generation and empties itself when full, which keeps it
// bounded without bookkeeping (callers ask for few distinct keys).
type catalogCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[catalogKey]*baagentv1.GetCatalogResponse
}

func newCatalogCache() *catalogCache {
	return &catalogCache{m: map[catalogKey]*baagentv1.GetCatalogResponse{}}
}

// get returns a copy of the cached response for k, or nil.
func (c *catalogCache) get(k catalogKey) *baagentv1.GetCatalogResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[k]
	if r == nil {
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
		clear(c.m)
		c.gen = k.gen
	case len(c.m) >= maxCatalogCache:
		clear(c.m)
	}
	c.m[k] = copyCatalog(r)
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
