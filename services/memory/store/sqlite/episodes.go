package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

const episodeCols = `rid, tenant, id, source, content, conversation_id, run_id, idem_key, created_at, status, error, attempts, redactions, processed_at`

func scanEpisode(sc interface{ Scan(...any) error }) (*store.Episode, int64, error) {
	var e store.Episode
	var rid, created, processed int64
	var source, status int32
	if err := sc.Scan(&rid, &e.Tenant, &e.ID, &source, &e.Content, &e.ConversationID, &e.RunID, &e.IdempotencyKey,
		&created, &status, &e.Error, &e.Attempts, &e.Redactions, &processed); err != nil {
		return nil, 0, err
	}
	e.Source, e.Status = store.EpisodeSource(source), store.EpisodeStatus(status)
	e.CreatedAt, e.ProcessedAt = fromNanos(created), fromNanos(processed)
	return &e, rid, nil
}

// CreateEpisode stores a pending episode, or returns the one already
// stored under its idempotency key.
func (s *Store) CreateEpisode(ctx context.Context, ep *store.Episode) (*store.Episode, bool, error) {
	if ep == nil || ep.Tenant == "" || ep.ID == "" {
		return nil, false, errors.New("memory sqlite: episode needs a tenant and an id")
	}
	var out *store.Episode
	created := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if ep.IdempotencyKey != "" {
			row := tx.QueryRowContext(ctx, `SELECT `+episodeCols+` FROM episodes WHERE tenant = ? AND idem_key = ?`, ep.Tenant, ep.IdempotencyKey)
			e, rid, err := scanEpisode(row)
			switch {
			case err == nil:
				if e.EntityIDs, err = episodeEntities(ctx, tx, rid); err != nil {
					return err
				}
				out = e
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("memory sqlite: create episode: %w", err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO episodes (tenant, id, source, content, conversation_id, run_id, idem_key, created_at, status, redactions)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			ep.Tenant, ep.ID, int32(ep.Source), ep.Content, ep.ConversationID, ep.RunID, ep.IdempotencyKey,
			nanos(ep.CreatedAt), int32(store.StatusPending), ep.Redactions)
		if err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("%w: episode %q exists", store.ErrConflict, ep.ID)
			}
			return fmt.Errorf("memory sqlite: create episode: %w", err)
		}
		c := *ep
		c.Status, c.Attempts, c.Error, c.ProcessedAt, c.EntityIDs = store.StatusPending, 0, "", time.Time{}, nil
		c.CreatedAt = fromNanos(nanos(ep.CreatedAt))
		out, created = &c, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

func episodeEntities(ctx context.Context, q queryer, rid int64) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT e.id FROM mentions m JOIN entities e ON e.rid = m.entity_rid WHERE m.episode_rid = ? ORDER BY e.id`, rid)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: mentions: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("memory sqlite: mentions: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// fillMentions sets EntityIDs of many episodes with one query.
func fillMentions(ctx context.Context, q queryer, eps []*store.Episode, rids []int64) error {
	if len(eps) == 0 {
		return nil
	}
	byRid := make(map[int64]*store.Episode, len(eps))
	args := make([]any, len(rids))
	for i, r := range rids {
		byRid[r] = eps[i]
		args[i] = r
	}
	rows, err := q.QueryContext(ctx, `SELECT m.episode_rid, e.id FROM mentions m JOIN entities e ON e.rid = m.entity_rid
		WHERE m.episode_rid IN (`+placeholders(len(args))+`) ORDER BY e.id`, args...)
	if err != nil {
		return fmt.Errorf("memory sqlite: mentions: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var rid int64
		var id string
		if err := rows.Scan(&rid, &id); err != nil {
			return fmt.Errorf("memory sqlite: mentions: %w", err)
		}
		if e := byRid[rid]; e != nil {
			e.EntityIDs = append(e.EntityIDs, id)
		}
	}
	return rows.Err()
}

// GetEpisode reads one episode with its mentions.
func (s *Store) GetEpisode(ctx context.Context, tenant, id string) (*store.Episode, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+episodeCols+` FROM episodes WHERE tenant = ? AND id = ?`, tenant, id)
	e, rid, err := scanEpisode(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("episode", id)
	}
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: get episode: %w", err)
	}
	if e.EntityIDs, err = episodeEntities(ctx, s.r, rid); err != nil {
		return nil, err
	}
	return e, nil
}

// ListEpisodes is newest first.
func (s *Store) ListEpisodes(ctx context.Context, tenant string, f store.EpisodeFilter, p store.Page) ([]*store.Episode, string, error) {
	cur, err := decodeCursor(p.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(p)
	q := `SELECT ` + episodeCols + ` FROM episodes WHERE tenant = ?`
	args := []any{tenant}
	if f.ConversationID != "" {
		q += ` AND conversation_id = ?`
		args = append(args, f.ConversationID)
	}
	if f.Status != 0 {
		q += ` AND status = ?`
		args = append(args, int32(f.Status))
	}
	if cur != nil {
		q += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, cur.N, cur.N, cur.I)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, size+1)
	eps, rids, err := s.queryEpisodes(ctx, s.r, q, args...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(eps) > size {
		eps, rids = eps[:size], rids[:size]
		last := eps[size-1]
		next = encodeCursor(cursor{N: nanos(last.CreatedAt), I: last.ID})
	}
	if err := fillMentions(ctx, s.r, eps, rids); err != nil {
		return nil, "", err
	}
	return eps, next, nil
}

func (s *Store) queryEpisodes(ctx context.Context, q queryer, query string, args ...any) ([]*store.Episode, []int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("memory sqlite: episodes: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var eps []*store.Episode
	var rids []int64
	for rows.Next() {
		e, rid, err := scanEpisode(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("memory sqlite: episodes: %w", err)
		}
		eps = append(eps, e)
		rids = append(rids, rid)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("memory sqlite: episodes: %w", err)
	}
	return eps, rids, nil
}

// ClaimEpisodes leases the oldest claimable episodes of any tenant.
func (s *Store) ClaimEpisodes(ctx context.Context, owner string, limit int, lease time.Duration) ([]*store.Episode, error) {
	if owner == "" {
		return nil, errors.New("memory sqlite: claim needs an owner")
	}
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, 1000)
	var eps []*store.Episode
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.o.Now()
		var err error
		eps, _, err = s.queryEpisodes(ctx, tx, `UPDATE episodes SET status = 2, lease_owner = ?, lease_until = ?, attempts = attempts + 1
			WHERE rid IN (SELECT rid FROM episodes WHERE status IN (1, 2) AND (status = 1 OR lease_until < ?)
				ORDER BY created_at, id LIMIT ?)
			RETURNING `+episodeCols, owner, now.Add(lease).UnixNano(), now.UnixNano(), limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order; oldest first.
	sortEpisodesOldest(eps)
	return eps, nil
}

func sortEpisodesOldest(eps []*store.Episode) {
	for i := 1; i < len(eps); i++ {
		for j := i; j > 0 && episodeBefore(eps[j], eps[j-1]); j-- {
			eps[j], eps[j-1] = eps[j-1], eps[j]
		}
	}
}

func episodeBefore(a, b *store.Episode) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// leased checks within tx that owner holds the episode's lease and
// returns its rid.
func leased(ctx context.Context, tx *sql.Tx, tenant, id, owner string) (int64, error) {
	var rid int64
	var status int32
	var holder string
	err := tx.QueryRowContext(ctx, `SELECT rid, status, lease_owner FROM episodes WHERE tenant = ? AND id = ?`, tenant, id).Scan(&rid, &status, &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("episode", id)
	}
	if err != nil {
		return 0, fmt.Errorf("memory sqlite: episode: %w", err)
	}
	if store.EpisodeStatus(status) != store.StatusProcessing || holder != owner {
		return 0, fmt.Errorf("%w: episode %q is not leased to %q", store.ErrConflict, id, owner)
	}
	return rid, nil
}

// FailEpisode releases a claimed episode.
func (s *Store) FailEpisode(ctx context.Context, tenant, id, owner, msg string, final bool) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		rid, err := leased(ctx, tx, tenant, id, owner)
		if err != nil {
			return err
		}
		if final {
			_, err = tx.ExecContext(ctx, `UPDATE episodes SET status = 4, error = ?, processed_at = ?, lease_owner = '', lease_until = 0 WHERE rid = ?`,
				msg, s.o.Now().UnixNano(), rid)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE episodes SET status = 1, error = ?, lease_owner = '', lease_until = 0 WHERE rid = ?`, msg, rid)
		}
		if err != nil {
			return fmt.Errorf("memory sqlite: fail episode: %w", err)
		}
		return nil
	})
}

// EntityEpisodes is the newest episodes mentioning the entity.
func (s *Store) EntityEpisodes(ctx context.Context, tenant, entityID string, limit int) ([]*store.Episode, error) {
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, 500)
	eps, rids, err := s.queryEpisodes(ctx, s.r, `SELECT `+prefixed("ep.", episodeCols)+` FROM entities e
		JOIN mentions m ON m.entity_rid = e.rid JOIN episodes ep ON ep.rid = m.episode_rid
		WHERE +e.tenant = ? AND e.id = ? AND +ep.tenant = ?
		ORDER BY ep.created_at DESC, ep.id DESC LIMIT ?`, tenant, entityID, tenant, limit)
	if err != nil {
		return nil, err
	}
	if err := fillMentions(ctx, s.r, eps, rids); err != nil {
		return nil, err
	}
	return eps, nil
}

// prefixed qualifies a column list.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
