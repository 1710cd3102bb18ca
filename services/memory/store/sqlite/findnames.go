package sqlite

import (
	"context"
	"fmt"

	"github.com/baagent/baagent/services/memory/store"
)

// FindEntitiesByNames is FindEntity for many names in one query over the
// lower-cased name/alias table; per name the same order decides: a name
// match beats an alias match, then the most mentioned, then the oldest row.
func (s *Store) FindEntitiesByNames(ctx context.Context, tenant string, names []string) (map[string]*store.Entity, error) {
	if len(names) > store.MaxFindNames {
		return nil, fmt.Errorf("memory sqlite: find entities: %d names, at most %d", len(names), store.MaxFindNames)
	}
	keys := make([]any, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		k := key(n)
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
	}
	out := make(map[string]*store.Entity, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(keys)+2)
	args = append(args, tenant)
	args = append(args, keys...)
	args = append(args, tenant)
	rows, err := s.r.QueryContext(ctx, `SELECT n.key, `+prefixed("e.", entityCols)+`
		FROM entity_names n JOIN entities e ON e.rid = n.entity_rid
		WHERE n.tenant = ? AND n.key IN (`+placeholders(len(keys))+`) AND e.tenant = ?
		ORDER BY n.key, n.is_alias, e.mention_count DESC, e.rid`, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: find entities: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var k string
		e, _, err := scanEntity(keyedScanner{rows.Scan, &k})
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: find entities: %w", err)
		}
		// The rows of a key come best first: keep the first.
		if _, ok := out[k]; !ok {
			out[k] = e
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory sqlite: find entities: %w", err)
	}
	return out, nil
}

// keyedScanner scans a leading column into key, the rest as scanEntity
// asks.
type keyedScanner struct {
	scan func(...any) error
	key  *string
}

func (k keyedScanner) Scan(dest ...any) error {
	return k.scan(append([]any{k.key}, dest...)...)
}
