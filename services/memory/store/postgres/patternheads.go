package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// PatternHeads reads the scoring fields of the tenant's patterns updated
// after since (memory_patterns_updated serves the range) and of the
// granted ones updated or granted after since, by update time.
func (s *Store) PatternHeads(ctx context.Context, tenant string, since time.Time, limit int) ([]*store.PatternRecord, error) {
	if limit <= 0 || !validText(tenant) {
		return nil, nil
	}
	own, granted := ``, ``
	args := []any{tenant, limit}
	if !since.IsZero() {
		// Stored times are microseconds: a head read at since is not
		// read again.
		own, granted = ` AND p.updated_at > $3`, ` AND (p.updated_at > $3 OR g.created_at > $3)`
		args = append(args, ts(since))
	}
	rows, err := s.pool.Query(ctx, `
SELECT `+scoreCols+` FROM memory_patterns p WHERE p.tenant = $1`+own+`
UNION ALL
SELECT `+scoreCols+` FROM memory_pattern_grants g JOIN memory_patterns p ON p.tenant = g.owner AND p.id = g.pattern_id
WHERE g.grantee = $1 AND g.owner <> $1`+granted+`
ORDER BY 14, 2, 1
LIMIT $2`, args...)
	if err != nil {
		return nil, fmt.Errorf("memory store: pattern heads: %w", err)
	}
	defer rows.Close()
	out := make([]*store.PatternRecord, 0, min(limit, 256))
	for rows.Next() {
		rec, err := scanScore(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: pattern heads: %w", err)
	}
	return out, nil
}
