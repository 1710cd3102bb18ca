package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/services/memory/store"
)

const episodeCols = `tenant, id, source, content, conversation_id, run_id, idempotency_key,
	created_at, status, error, attempts, redactions, processed_at`

func scanEpisode(row pgx.Row) (*store.Episode, error) {
	var (
		ep        store.Episode
		processed *time.Time
	)
	err := row.Scan(&ep.Tenant, &ep.ID, &ep.Source, &ep.Content, &ep.ConversationID, &ep.RunID,
		&ep.IdempotencyKey, &ep.CreatedAt, &ep.Status, &ep.Error, &ep.Attempts, &ep.Redactions, &processed)
	if err != nil {
		return nil, err
	}
	if processed != nil {
		ep.ProcessedAt = *processed
	}
	return &ep, nil
}

func collectEpisodes(rows pgx.Rows) ([]*store.Episode, error) {
	defer rows.Close()
	var out []*store.Episode
	for rows.Next() {
		ep, err := scanEpisode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ep)
	}
	return out, rows.Err()
}

// fillMentions sets EntityIDs of episodes of one tenant.
func fillMentions(ctx context.Context, q querier, tenant string, eps []*store.Episode) error {
	if len(eps) == 0 {
		return nil
	}
	ids := make([]string, len(eps))
	byID := make(map[string]*store.Episode, len(eps))
	for i, ep := range eps {
		ids[i] = ep.ID
		byID[ep.ID] = ep
	}
	rows, err := q.Query(ctx, `SELECT episode_id, entity_id FROM memory_mentions
		WHERE tenant = $1 AND episode_id = ANY($2) ORDER BY episode_id, pos, entity_id`, tenant, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var epID, entID string
		if err := rows.Scan(&epID, &entID); err != nil {
			return err
		}
		if ep := byID[epID]; ep != nil {
			ep.EntityIDs = append(ep.EntityIDs, entID)
		}
	}
	return rows.Err()
}

// querier is a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateEpisode stores a pending episode, or returns the tenant's episode
// of the same idempotency key and false.
func (s *Store) CreateEpisode(ctx context.Context, ep *store.Episode) (*store.Episode, bool, error) {
	if ep == nil || ep.Tenant == "" || ep.ID == "" {
		return nil, false, errors.New("memory store: episode needs a tenant and an id")
	}
	if !validText(ep.Tenant, ep.ID, ep.Content, ep.ConversationID, ep.RunID, ep.IdempotencyKey, ep.Error) {
		return nil, false, errInvalidText
	}
	created := ep.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	status := ep.Status
	if status == 0 {
		status = store.StatusPending
	}
	row := s.pool.QueryRow(ctx, `
INSERT INTO memory_episodes (tenant, id, source, content, conversation_id, run_id, idempotency_key,
	created_at, status, error, attempts, redactions)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT DO NOTHING
RETURNING `+episodeCols,
		ep.Tenant, ep.ID, int32(ep.Source), ep.Content, ep.ConversationID, ep.RunID, ep.IdempotencyKey,
		created, int32(status), ep.Error, ep.Attempts, ep.Redactions)
	got, err := scanEpisode(row)
	if err == nil {
		return got, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("memory store: create episode: %w", err)
	}
	// A conflict: the idempotency key was used, or the id exists.
	if ep.IdempotencyKey != "" {
		first, err := scanEpisode(s.pool.QueryRow(ctx, `SELECT `+episodeCols+` FROM memory_episodes
			WHERE tenant = $1 AND idempotency_key = $2`, ep.Tenant, ep.IdempotencyKey))
		if err == nil {
			if err := fillMentions(ctx, s.pool, ep.Tenant, []*store.Episode{first}); err != nil {
				return nil, false, err
			}
			return first, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("memory store: create episode: %w", err)
		}
	}
	return nil, false, fmt.Errorf("%w: episode %q exists", store.ErrConflict, ep.ID)
}

// GetEpisode reads one episode with its mentions.
func (s *Store) GetEpisode(ctx context.Context, tenant, id string) (*store.Episode, error) {
	if !validText(tenant, id) {
		return nil, notFound("episode", id)
	}
	ep, err := scanEpisode(s.pool.QueryRow(ctx, `SELECT `+episodeCols+` FROM memory_episodes
		WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("episode", id)
	}
	if err != nil {
		return nil, fmt.Errorf("memory store: get episode: %w", err)
	}
	if err := fillMentions(ctx, s.pool, tenant, []*store.Episode{ep}); err != nil {
		return nil, fmt.Errorf("memory store: get episode: %w", err)
	}
	return ep, nil
}

// ListEpisodes lists a tenant's episodes, newest first.
func (s *Store) ListEpisodes(ctx context.Context, tenant string, f store.EpisodeFilter, p store.Page) ([]*store.Episode, string, error) {
	size := pageSize(p.Size)
	if !validText(tenant, f.ConversationID) {
		return nil, "", nil
	}
	var (
		afterSet bool
		afterAt  time.Time
		afterID  string
	)
	if p.Token != "" {
		key, id, err := decodeToken(p.Token)
		if err != nil {
			return nil, "", err
		}
		ns, err := strconv.ParseInt(key, 10, 64)
		if err != nil || !validText(id) {
			return nil, "", errBadToken
		}
		afterSet, afterAt, afterID = true, time.Unix(0, ns), id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+episodeCols+` FROM memory_episodes
WHERE tenant = $1
	AND ($2 = '' OR conversation_id = $2)
	AND ($3 = 0 OR status = $3)
	AND (NOT $4 OR (created_at, id) < ($5, $6))
ORDER BY created_at DESC, id DESC
LIMIT $7`, tenant, f.ConversationID, int32(f.Status), afterSet, afterAt, afterID, size+1)
	if err != nil {
		return nil, "", fmt.Errorf("memory store: list episodes: %w", err)
	}
	eps, err := collectEpisodes(rows)
	if err != nil {
		return nil, "", fmt.Errorf("memory store: list episodes: %w", err)
	}
	next := ""
	if len(eps) > size {
		eps = eps[:size]
		last := eps[size-1]
		next = encodeToken(strconv.FormatInt(last.CreatedAt.UnixNano(), 10), last.ID)
	}
	if err := fillMentions(ctx, s.pool, tenant, eps); err != nil {
		return nil, "", fmt.Errorf("memory store: list episodes: %w", err)
	}
	return eps, next, nil
}

// maxClaim bounds one ClaimEpisodes call.
const maxClaim = 1000

// ClaimEpisodes leases up to limit claimable episodes of any tenant to
// owner, oldest first. SKIP LOCKED lets replicas claim side by side without
// waiting on each other's rows or taking the same one.
func (s *Store) ClaimEpisodes(ctx context.Context, owner string, limit int, lease time.Duration) ([]*store.Episode, error) {
	if owner == "" || !validText(owner) {
		return nil, errors.New("memory store: claim needs an owner of valid text")
	}
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, maxClaim)
	if lease <= 0 {
		lease = time.Minute
	}
	rows, err := s.pool.Query(ctx, `
WITH c AS (
	SELECT tenant, id FROM memory_episodes
	WHERE status IN (1, 2) AND (status = 1 OR lease_until < clock_timestamp())
	ORDER BY created_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE memory_episodes e
SET status = 2, lease_owner = $1, lease_until = clock_timestamp() + $3 * interval '1 microsecond',
	attempts = e.attempts + 1
FROM c WHERE e.tenant = c.tenant AND e.id = c.id
RETURNING e.tenant, e.id, e.source, e.content, e.conversation_id, e.run_id, e.idempotency_key,
	e.created_at, e.status, e.error, e.attempts, e.redactions, e.processed_at`,
		owner, limit, lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("memory store: claim episodes: %w", err)
	}
	eps, err := collectEpisodes(rows)
	if err != nil {
		return nil, fmt.Errorf("memory store: claim episodes: %w", err)
	}
	slices.SortFunc(eps, func(a, b *store.Episode) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	s.metrics.claimed.Add(float64(len(eps)))
	return eps, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lockLeased locks a claimed episode for its owner inside tx: ErrNotFound
// when the tenant has no such episode, ErrConflict when owner does not hold
// it.
func lockLeased(ctx context.Context, tx pgx.Tx, tenant, id, owner string) error {
	if !validText(tenant, id) {
		return notFound("episode", id)
	}
	if !validText(owner) {
		return fmt.Errorf("%w: episode %q is not leased to that owner", store.ErrConflict, id)
	}
	var (
		status int32
		holder string
	)
	err := tx.QueryRow(ctx, `SELECT status, lease_owner FROM memory_episodes
		WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&status, &holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound("episode", id)
	}
	if err != nil {
		return err
	}
	if store.EpisodeStatus(status) != store.StatusProcessing || holder != owner {
		return fmt.Errorf("%w: episode %q is not leased to %q", store.ErrConflict, id, owner)
	}
	return nil
}

// FailEpisode releases a claimed episode: back to pending, or failed when
// final.
func (s *Store) FailEpisode(ctx context.Context, tenant, id, owner, msg string, final bool) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockLeased(ctx, tx, tenant, id, owner); err != nil {
			return err
		}
		status := store.StatusPending
		if final {
			status = store.StatusFailed
		}
		_, err := tx.Exec(ctx, `UPDATE memory_episodes
SET status = $3, error = $4, lease_owner = '', lease_until = NULL,
	processed_at = CASE WHEN $5 THEN clock_timestamp() END
WHERE tenant = $1 AND id = $2`, tenant, id, int32(status), cleanText(msg), final)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("memory store: fail episode: %w", err)
	}
	return err
}

// DeleteEpisode removes an episode and what only it supported.
func (s *Store) DeleteEpisode(ctx context.Context, tenant, id string) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	if !validText(tenant, id) {
		return out, notFound("episode", id)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT true FROM memory_episodes WHERE tenant = $1 AND id = $2 FOR UPDATE`,
			tenant, id).Scan(&exists); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound("episode", id)
			}
			return err
		}
		seq, err := bumpTenant(ctx, tx, tenant, true)
		if err != nil {
			return err
		}
		out, err = deleteEpisodes(ctx, tx, tenant, []string{id}, seq)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.DeleteOutcome{}, fmt.Errorf("memory store: delete episode: %w", err)
	}
	return out, err
}

// DeleteConversation deletes every episode and interaction trace of a
// conversation.
func (s *Store) DeleteConversation(ctx context.Context, tenant, conversationID string) (store.DeleteOutcome, error) {
	if conversationID == "" {
		return store.DeleteOutcome{}, errors.New("memory store: delete conversation needs its id")
	}
	var out store.DeleteOutcome
	if !validText(tenant, conversationID) {
		return out, nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = store.DeleteOutcome{}
		tag, err := tx.Exec(ctx, `DELETE FROM memory_pattern_traces WHERE tenant = $1 AND conversation_id = $2`, tenant, conversationID)
		if err != nil {
			return err
		}
		traces := int(tag.RowsAffected())
		out.Traces = traces
		rows, err := tx.Query(ctx, `SELECT id FROM memory_episodes WHERE tenant = $1 AND conversation_id = $2
			ORDER BY id FOR UPDATE`, tenant, conversationID)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		seq, err := bumpTenant(ctx, tx, tenant, true)
		if err != nil {
			return err
		}
		out, err = deleteEpisodes(ctx, tx, tenant, ids, seq)
		out.Traces = traces
		return err
	})
	if err != nil {
		return store.DeleteOutcome{}, fmt.Errorf("memory store: delete conversation: %w", err)
	}
	return out, nil
}

// deleteEpisodes deletes episodes (locked by the caller), their mentions
// and relation support, then the relations and entities nothing supports
// any more, and counts each kind.
func deleteEpisodes(ctx context.Context, tx pgx.Tx, tenant string, ids []string, seq int64) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	tag, err := tx.Exec(ctx, `DELETE FROM memory_episodes WHERE tenant = $1 AND id = ANY($2)`, tenant, ids)
	if err != nil {
		return out, err
	}
	out.Episodes = int(tag.RowsAffected())
	// Mentions: the entities lose one mention each.
	rows, err := tx.Query(ctx, `DELETE FROM memory_mentions WHERE tenant = $1 AND episode_id = ANY($2)
		RETURNING entity_id`, tenant, ids)
	if err != nil {
		return out, err
	}
	entityIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, err
	}
	if _, err := tx.Exec(ctx, `
UPDATE memory_entities e SET mention_count = greatest(e.mention_count - d.n, 0), updated_at = clock_timestamp(), seq = $3
FROM (SELECT id, count(*) AS n FROM unnest($2::text[]) id GROUP BY id) d
WHERE e.tenant = $1 AND e.id = d.id`, tenant, entityIDs, seq); err != nil {
		return out, err
	}
	// Relation support.
	rows, err = tx.Query(ctx, `DELETE FROM memory_relation_episodes WHERE tenant = $1 AND episode_id = ANY($2)
		RETURNING relation_id`, tenant, ids)
	if err != nil {
		return out, err
	}
	relIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, err
	}
	if err := recomputeRelations(ctx, tx, tenant, uniq(relIDs)); err != nil {
		return out, err
	}
	// Entities no remaining episode mentions go, with their relations.
	rows, err = tx.Query(ctx, `
SELECT e.id FROM memory_entities e
WHERE e.tenant = $1 AND e.id = ANY($2)
	AND NOT EXISTS (SELECT 1 FROM memory_mentions m WHERE m.tenant = $1 AND m.entity_id = e.id)`,
		tenant, uniq(entityIDs))
	if err != nil {
		return out, err
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, err
	}
	rels, err := deleteRelationsOf(ctx, tx, tenant, orphans)
	if err != nil {
		return out, err
	}
	out.Relations += rels
	ents, err := deleteEntityRows(ctx, tx, tenant, orphans, seq)
	if err != nil {
		return out, err
	}
	out.Entities = ents
	// Relations no remaining episode supports go.
	rows, err = tx.Query(ctx, `
DELETE FROM memory_relations r
WHERE r.tenant = $1 AND r.id = ANY($2)
	AND NOT EXISTS (SELECT 1 FROM memory_relation_episodes x WHERE x.tenant = $1 AND x.relation_id = r.id)
RETURNING r.id`, tenant, uniq(relIDs))
	if err != nil {
		return out, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, err
	}
	out.Relations += len(gone)
	return out, nil
}

// deleteRelationsOf deletes every relation touching the entities, with its
// support rows, and returns how many relations went.
func deleteRelationsOf(ctx context.Context, tx pgx.Tx, tenant string, entityIDs []string) (int, error) {
	if len(entityIDs) == 0 {
		return 0, nil
	}
	rows, err := tx.Query(ctx, `DELETE FROM memory_relations
		WHERE tenant = $1 AND (source_id = ANY($2) OR target_id = ANY($2)) RETURNING id`, tenant, entityIDs)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM memory_relation_episodes WHERE tenant = $1 AND relation_id = ANY($2)`,
			tenant, ids); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// deleteEntityRows deletes entities and their mentions, leaving tombstones
// at seq for the vector indexes, and returns how many went.
func deleteEntityRows(ctx context.Context, tx pgx.Tx, tenant string, ids []string, seq int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM memory_mentions WHERE tenant = $1 AND entity_id = ANY($2)`, tenant, ids); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `DELETE FROM memory_entities WHERE tenant = $1 AND id = ANY($2)
		RETURNING community_id`, tenant, ids)
	if err != nil {
		return 0, err
	}
	comms, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `
UPDATE memory_communities c SET member_count = (SELECT count(*) FROM memory_entities e
	WHERE e.tenant = c.tenant AND e.community_id = c.id)
WHERE c.tenant = $1 AND c.id = ANY($2)`, tenant, uniq(comms)); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO memory_entity_tombstones (tenant, id, seq) SELECT $1, id, $3 FROM unnest($2::text[]) id
ON CONFLICT (tenant, id) DO UPDATE SET seq = EXCLUDED.seq`, tenant, ids, seq); err != nil {
		return 0, err
	}
	if err := pruneTombstones(ctx, tx, tenant); err != nil {
		return 0, err
	}
	return len(comms), nil
}

// maxTombstones is how many deleted-entity records a tenant keeps for the
// vector indexes of other replicas; an index further behind reloads the
// tenant. A variable for tests.
var maxTombstones = 10_000

// pruneTombstones keeps the tenant's newest maxTombstones tombstones and
// raises the tenant's tombstone floor past the ones it drops, inside the
// deleting transaction (which holds the tenant row's lock).
func pruneTombstones(ctx context.Context, tx pgx.Tx, tenant string) error {
	_, err := tx.Exec(ctx, `
WITH cut AS (
	SELECT seq FROM memory_entity_tombstones WHERE tenant = $1
	ORDER BY seq DESC OFFSET $2 LIMIT 1
), gone AS (
	DELETE FROM memory_entity_tombstones t USING cut
	WHERE t.tenant = $1 AND t.seq <= cut.seq
	RETURNING t.seq
)
UPDATE memory_tenants SET tomb_floor = greatest(tomb_floor, (SELECT max(seq) FROM gone))
WHERE tenant = $1 AND EXISTS (SELECT 1 FROM gone)`, tenant, maxTombstones)
	return err
}

// uniq returns ss without repeats, in first-seen order.
func uniq(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0:0]
	for _, v := range ss {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
