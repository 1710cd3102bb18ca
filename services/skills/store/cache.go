package store

import (
	"container/list"
	"sync"
)

// bundleCache keeps recently read revisions' files, bounded by their total
// size, so that paging through a resource does not fetch its bundle from
// the object store for every page. Revisions are immutable, so an entry
// never goes stale; it is dropped when evicted or swept.
type bundleCache struct {
	mu    sync.Mutex // never held across I/O
	max   int64
	size  int64
	order *list.List // front: most recent; values are *cacheEntry
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key   string
	files []File
	size  int64
}

func newBundleCache(maxBytes int64) *bundleCache {
	return &bundleCache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *bundleCache) lock()   { c.mu.Lock() }
func (c *bundleCache) unlock() { c.mu.Unlock() }

func (c *bundleCache) get(key string) []File {
	c.lock()
	defer c.unlock()
	el := c.byKey[key]
	if el == nil {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).files
}

func (c *bundleCache) put(key string, files []File) {
	var size int64
	for _, f := range files {
		size += int64(len(f.Data)) + int64(len(f.Path))
	}
	if size > c.max {
		return
	}
	c.lock()
	defer c.unlock()
	if c.byKey[key] != nil {
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, files: files, size: size})
	c.size += size
	for c.size > c.max {
		c.removeLocked(c.order.Back())
	}
}

func (c *bundleCache) drop(key string) {
	c.lock()
	defer c.unlock()
	if el := c.byKey[key]; el != nil {
		c.removeLocked(el)
	}
}

func (c *bundleCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.byKey, e.key)
	c.size -= e.size
}
