package vecindex

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// memSource is a Source over a change log in memory, as a store keeps it:
// every change gets the next sequence; a vector's latest change replaces
// its earlier ones; removals are kept after floor only.
type memSource struct {
	mu      sync.Mutex
	seq     int64
	floor   int64
	latest  map[string]Change // by id; Vec empty for removals
	seqCall int
}

func newMemSource() *memSource { return &memSource{latest: map[string]Change{}} }

func (m *memSource) put(id, typ string, v []float32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.latest[id] = Change{Seq: m.seq, ID: id, Type: typ, Vec: v}
}

func (m *memSource) del(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.latest[id] = Change{Seq: m.seq, ID: id}
}

// prune forgets every removal.
func (m *memSource) prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, c := range m.latest {
		if len(c.Vec) == 0 {
			delete(m.latest, id)
			m.floor = max(m.floor, c.Seq)
		}
	}
}

func (m *memSource) Seq(context.Context, string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seqCall++
	return m.seq, nil
}

func (m *memSource) Snapshot(_ context.Context, _ string, after string, limit int) ([]Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cs []Change
	for id, c := range m.latest {
		if id > after && len(c.Vec) > 0 {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b Change) int { return strings.Compare(a.ID, b.ID) })
	if len(cs) > limit {
		cs = cs[:limit]
	}
	return cs, nil
}

func (m *memSource) Changes(_ context.Context, _ string, since int64, limit int) ([]Change, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if since > 0 && since < m.floor {
		return nil, 0, ErrTooOld
	}
	var cs []Change
	for _, c := range m.latest {
		if c.Seq > since {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b Change) int { return int(a.Seq - b.Seq) })
	if len(cs) > limit {
		cs = cs[:limit]
		return cs, cs[len(cs)-1].Seq, nil
	}
	return cs, m.seq, nil
}
