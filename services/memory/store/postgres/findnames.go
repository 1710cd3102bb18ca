package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/baagent/baagent/services/memory/store"
)

// FindEntitiesByNames is FindEntity for many names in one query: each name
// is looked up as FindEntity does (the same predicate and order, on the
// lower(name) and alias indexes), an exact name beating an alias, then the
// most mentioned, then the smallest id.
func (s *Store) FindEntitiesByNames(ctx context.Context, tenant string, names []string) (map[string]*store.Entity, error) {
	if len(names) > store.MaxFindNames {
		return nil, fmt.Errorf("memory store: find entities: %d names, at most %d", len(names), store.MaxFindNames)
	}
	// The first name of each key, trimmed as FindEntity trims it; names
	// FindEntity refuses (not valid text) find nothing.
	var (
		qs   []string
		keys []string
	)
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		n = strings.TrimSpace(n)
		k := store.NameKey(n)
		if n == "" || seen[k] || !validText(n) {
			continue
		}
		seen[k] = true
		qs = append(qs, n)
		keys = append(keys, k)
	}
	out := make(map[string]*store.Entity, len(qs))
	if len(qs) == 0 || !validText(tenant) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT q.i, e.* FROM unnest($2::text[]) WITH ORDINALITY AS q(n, i)
CROSS JOIN LATERAL (
	SELECT `+entityCols+` FROM memory_entities
	WHERE tenant = $1 AND (lower(name) = lower(q.n) OR aliases_lower @> ARRAY[lower(q.n)])
	ORDER BY (lower(name) = lower(q.n)) DESC, mention_count DESC, id
	LIMIT 1) e`, tenant, qs)
	if err != nil {
		return nil, fmt.Errorf("memory store: find entities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		e, err := scanEntity(keyedScanner{rows.Scan, &i})
		if err != nil {
			return nil, fmt.Errorf("memory store: find entities: %w", err)
		}
		if i < 1 || i > int64(len(keys)) {
			return nil, fmt.Errorf("memory store: find entities: ordinality %d out of range", i)
		}
		out[keys[i-1]] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: find entities: %w", err)
	}
	return out, nil
}

// keyedScanner scans a leading column into lead, the rest as scanEntity
// asks.
type keyedScanner struct {
	scan func(...any) error
	lead any
}

func (k keyedScanner) Scan(dest ...any) error {
	return k.scan(append([]any{k.lead}, dest...)...)
}
