package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/baagent/baagent/services/memory/store"
)

// FindEntitiesByNames is FindEntity for many names in one query: the
// entities named or aliased by any of the names are read at once (the
// lower(name) index and the tenant-keyed alias index, one probe each),
// then each name takes the best of them in FindEntity's order: an exact
// name before an alias, then the most mentioned, then the smallest id.
// FindEntity's own predicate per name (lower(name) = lower(n) or
// aliases_lower holding lower(n)) is the join condition.
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
	// Two branches, each on its index: entities named so, and entities
	// aliased so. The alias branch filters by tenant outside its subquery
	// (OFFSET 0 keeps the filter out), so that even without statistics
	// the planner probes the tenant-keyed alias index rather than scanning
	// the tenant's entities and computing their keys row by row.
	rows, err := s.pool.Query(ctx, `WITH q AS MATERIALIZED (
	SELECT i, lower(n) AS k FROM unnest($2::text[]) WITH ORDINALITY AS u(n, i)),
m AS (
	SELECT `+entityCols+`, lower(name) AS lname, aliases_lower FROM memory_entities
	WHERE tenant = $1 AND lower(name) = ANY(ARRAY(SELECT k FROM q))
	UNION ALL
	SELECT `+entityCols+`, lname, aliases_lower FROM (
		SELECT `+entityCols+`, lower(name) AS lname, aliases_lower FROM memory_entities
		WHERE memory_tenant_keys(tenant, aliases_lower) && memory_tenant_keys($1, ARRAY(SELECT k FROM q))
		OFFSET 0) a
	WHERE tenant = $1)
SELECT DISTINCT ON (q.i) q.i, `+prefixed("m.", entityCols)+` FROM q JOIN m ON m.lname = q.k OR q.k = ANY(m.aliases_lower)
ORDER BY q.i, (m.lname = q.k) DESC, m.mention_count DESC, m.id`, tenant, qs)
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

// prefixed qualifies each of the comma-separated columns with p.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
