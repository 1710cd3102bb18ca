package idempotency

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/baagent/baagent/internal/lru"
)

// Memory is a Store in the process: records expire after a TTL and the
// least recently written are evicted beyond a bound. It is not shared and
// does not survive a restart, so only the KV store gives exactly-once
// effects across replicas; Memory serves tests and embedders without NATS.
type Memory struct {
	ttl time.Duration

	mu      sync.Mutex // makes each read-check-write one step
	rev     uint64
	entries *lru.Cache[string, Entry]
}

var (
	_ Store              = (*Memory)(nil)
	_ ConversationPurger = (*Memory)(nil)
)

// NewMemory returns a Memory store; now nil is time.Now, ttl ≤ 0 one hour,
// maxEntries ≤ 0 ten thousand.
func NewMemory(now func() time.Time, ttl time.Duration, maxEntries int) *Memory {
	if ttl <= 0 {
		ttl = time.Hour
	}
	if maxEntries <= 0 {
		maxEntries = 10_000
	}
	return &Memory{ttl: ttl, entries: lru.New[string, Entry](lru.Options{MaxEntries: maxEntries, Now: now})}
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) (Entry, error) {
	e, ok := m.entries.Peek(key)
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, key string, rec Record) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries.Peek(key); ok {
		return 0, ErrExists
	}
	return m.put(key, rec), nil
}

// Update implements Store.
func (m *Memory) Update(_ context.Context, key string, rec Record, revision uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries.Peek(key)
	if !ok || e.Revision != revision {
		return 0, ErrRevision
	}
	return m.put(key, rec), nil
}

// PurgeConversation implements ConversationPurger.
func (m *Memory) PurgeConversation(_ context.Context, tenant, conversationID string) (int, error) {
	prefix := ConversationTag(tenant, conversationID) + "."
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries.RemoveIf(func(k string, _ Entry) bool { return strings.HasPrefix(k, prefix) }), nil
}

// Len is the number of records held, expired ones included until evicted.
func (m *Memory) Len() int { return m.entries.Len() }

// put writes a record as the most recent; reads (Peek) leave the order of
// writes, so the least recently written is evicted first.
func (m *Memory) put(key string, rec Record) uint64 {
	m.rev++
	m.entries.Put(key, Entry{Record: rec, Revision: m.rev}, 0, m.ttl)
	return m.rev
}
