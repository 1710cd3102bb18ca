package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/services/memory/vecindex"
)

// vecSource feeds the in-process vector index (package vecindex) from the
// entities table and the tombstones of deleted entities. Every graph write
// takes the tenant's next change sequence under the tenant row's lock, so
// sequence numbers commit in order: once a sequence is read, every change
// at or below it is visible to the queries that follow. One sequence
// number covers all of a transaction's changes.
type vecSource struct{ s *Store }

// Seq is the tenant's current change sequence.
func (v vecSource) Seq(ctx context.Context, tenant string) (int64, error) {
	var seq int64
	err := v.s.pool.QueryRow(ctx, `SELECT seq FROM memory_tenants WHERE tenant = $1`, tenant).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// Snapshot pages through the tenant's live vectors by id.
func (v vecSource) Snapshot(ctx context.Context, tenant, afterID string, limit int) ([]vecindex.Change, error) {
	start := time.Now()
	rows, err := v.s.pool.Query(ctx, `SELECT seq, id, type, embedding FROM memory_entities
		WHERE tenant = $1 AND id > $2 AND embedding IS NOT NULL ORDER BY id LIMIT $3`, tenant, afterID, limit)
	if err != nil {
		return nil, err
	}
	out, err := collectChanges(rows)
	if err != nil {
		return nil, err
	}
	v.s.metrics.vectorsLoaded.Add(float64(len(out)))
	v.s.metrics.vectorCatchup.Observe(time.Since(start).Seconds())
	return out, nil
}

// changesSQL lists the changes after $2: entities written (with their
// vector) and entities deleted (tombstones, no vector), by sequence.
const changesSQL = `
SELECT seq, id, type, embedding FROM memory_entities WHERE tenant = $1 AND seq > $2 AND embedding IS NOT NULL
UNION ALL
SELECT seq, id, '', NULL::real[] FROM memory_entity_tombstones WHERE tenant = $1 AND seq > $2
ORDER BY 1, 2
LIMIT $3`

// lastGroupSQL is the rest of one sequence's changes after id $3.
const lastGroupSQL = `
SELECT seq, id, type, embedding FROM memory_entities WHERE tenant = $1 AND seq = $2 AND id > $3 AND embedding IS NOT NULL
UNION ALL
SELECT seq, id, '', NULL::real[] FROM memory_entity_tombstones WHERE tenant = $1 AND seq = $2 AND id > $3
ORDER BY 1, 2`

// Changes returns the changes after since, in sequence order. A page never
// ends inside one sequence's changes (it is completed past limit), since
// the index resumes after the last sequence it saw. ErrTooOld when
// tombstones after since were pruned.
func (v vecSource) Changes(ctx context.Context, tenant string, since int64, limit int) ([]vecindex.Change, int64, error) {
	start := time.Now()
	// Read first: all changes up to cur are visible to the queries below.
	var cur, floor int64
	err := v.s.pool.QueryRow(ctx, `SELECT seq, tomb_floor FROM memory_tenants WHERE tenant = $1`, tenant).Scan(&cur, &floor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if since < floor {
		return nil, 0, vecindex.ErrTooOld
	}
	rows, err := v.s.pool.Query(ctx, changesSQL, tenant, since, limit)
	if err != nil {
		return nil, 0, err
	}
	out, err := collectChanges(rows)
	if err != nil {
		return nil, 0, err
	}
	next := cur
	if len(out) == limit && limit > 0 {
		last := out[len(out)-1]
		rows, err := v.s.pool.Query(ctx, lastGroupSQL, tenant, last.Seq, last.ID)
		if err != nil {
			return nil, 0, err
		}
		rest, err := collectChanges(rows)
		if err != nil {
			return nil, 0, err
		}
		out, next = append(out, rest...), last.Seq
	}
	// Tombstones pruned while the queries ran would be missing from them.
	if err := v.s.pool.QueryRow(ctx, `SELECT tomb_floor FROM memory_tenants WHERE tenant = $1`, tenant).Scan(&floor); err != nil {
		return nil, 0, err
	}
	if since < floor {
		return nil, 0, vecindex.ErrTooOld
	}
	v.s.metrics.vectorsLoaded.Add(float64(len(out)))
	v.s.metrics.vectorCatchup.Observe(time.Since(start).Seconds())
	return out, next, nil
}

func collectChanges(rows pgx.Rows) ([]vecindex.Change, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (vecindex.Change, error) {
		var c vecindex.Change
		err := r.Scan(&c.Seq, &c.ID, &c.Type, &c.Vec)
		return c, err
	})
}
