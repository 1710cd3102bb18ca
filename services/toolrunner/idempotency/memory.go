package idempotency

import (
	"context"
	"sync"
	"time"
)

// Memory is a Store in the process: records expire after a TTL and the
// oldest are evicted beyond a bound. It is not shared and does not survive
// a restart, so only the KV store gives exactly-once effects across
// replicas; Memory serves tests and embedders without NATS.
type Memory struct {
	now        func() time.Time
	ttl        time.Duration
	maxEntries int

	mu      sync.Mutex
	rev     uint64
	entries map[string]memEntry
}

type memEntry struct {
	Entry
	written time.Time
}

var _ Store = (*Memory)(nil)

// NewMemory returns a Memory store; now nil is time.Now, ttl ≤ 0 one hour,
// maxEntries ≤ 0 ten thousand.
func NewMemory(now func() time.Time, ttl time.Duration, maxEntries int) *Memory {
	if now == nil {
		now = time.Now
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	if maxEntries <= 0 {
		maxEntries = 10_000
	}
	return &Memory{now: now, ttl: ttl, maxEntries: maxEntries, entries: map[string]memEntry{}}
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live(key)
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e.Entry, nil
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, key string, rec Record) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live(key); ok {
		return 0, ErrExists
	}
	return m.put(key, rec), nil
}

// Update implements Store.
func (m *Memory) Update(_ context.Context, key string, rec Record, revision uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live(key)
	if !ok || e.Revision != revision {
		return 0, ErrRevision
	}
	return m.put(key, rec), nil
}

// Len is the number of records held, expired ones included until evicted.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func (m *Memory) live(key string) (memEntry, bool) {
	e, ok := m.entries[key]
	if ok && m.now().Sub(e.written) >= m.ttl {
		delete(m.entries, key)
		return memEntry{}, false
	}
	return e, ok
}

func (m *Memory) put(key string, rec Record) uint64 {
	m.rev++
	m.entries[key] = memEntry{Entry: Entry{Record: rec, Revision: m.rev}, written: m.now()}
	if len(m.entries) > m.maxEntries {
		m.evict()
	}
	return m.rev
}

// evict drops expired records, then the least recently written until the
// bound holds. It scans the map: eviction runs only past the bound.
func (m *Memory) evict() {
	now := m.now()
	oldestKey, oldest := "", now
	for k, e := range m.entries {
		if now.Sub(e.written) >= m.ttl {
			delete(m.entries, k)
			continue
		}
		if e.written.Before(oldest) || oldestKey == "" {
			oldestKey, oldest = k, e.written
		}
	}
	if len(m.entries) > m.maxEntries {
		delete(m.entries, oldestKey)
	}
}
