package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// PatternHeads reads the scoring fields of the tenant's patterns updated
// after since (patterns_updated serves the range) and of the granted ones
// updated or granted after since, by update time.
func (s *Store) PatternHeads(ctx context.Context, tenant string, since time.Time, limit int) ([]*store.PatternRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	after := int64(-1 << 63)
	if !since.IsZero() {
		after = nanos(utc(since))
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+scoreCols+` FROM patterns p INDEXED BY patterns_updated
		WHERE p.tenant = ? AND p.updated_at > ?
		UNION ALL SELECT `+scoreCols+` FROM pattern_grants g JOIN patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
		WHERE g.grantee = ? AND g.owner <> ? AND (p.updated_at > ? OR g.created_at > ?)
		ORDER BY 14, 2, 1 LIMIT ?`, tenant, after, tenant, tenant, after, after, limit)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern heads: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := make([]*store.PatternRecord, 0, min(limit, 256))
	for rows.Next() {
		rec, err := scanScore(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory sqlite: pattern heads: %w", err)
	}
	return out, nil
}
