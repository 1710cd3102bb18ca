package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/baagent/baagent/services/memory/store"
)

// entityRow is an entity as the write paths hold it.
type entityRow struct {
	rid        int64
	id         string
	name       string
	typ        string
	summary    string
	attributes map[string]string
	aliases    []string
	embedding  []byte
}

func loadEntityRow(ctx context.Context, tx *sql.Tx, tenant, id string) (*entityRow, error) {
	var e entityRow
	var attrs, aliases string
	err := tx.QueryRowContext(ctx, `SELECT rid, id, name, type, summary, attributes, aliases, embedding FROM entities WHERE +tenant = ? AND id = ?`, tenant, id).
		Scan(&e.rid, &e.id, &e.name, &e.typ, &e.summary, &attrs, &aliases, &e.embedding)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("entity", id)
	}
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: entity: %w", err)
	}
	if err := json.Unmarshal([]byte(attrs), &e.attributes); err != nil {
		return nil, fmt.Errorf("memory sqlite: entity %s attributes: %w", id, err)
	}
	if err := json.Unmarshal([]byte(aliases), &e.aliases); err != nil {
		return nil, fmt.Errorf("memory sqlite: entity %s aliases: %w", id, err)
	}
	return &e, nil
}

// tenantToken is the FTS token that confines a keyword search to one
// tenant: a hash, so that no tenant name needs escaping.
func tenantToken(tenant string) string {
	h := sha256.Sum256([]byte(tenant))
	return "t" + hex.EncodeToString(h[:12])
}

// ftsText is what keyword search sees of an entity: its names, and its
// summary and attributes.
func ftsText(e *entityRow) (names, body string) {
	names = strings.Join(append([]string{e.name}, e.aliases...), " ")
	var b strings.Builder
	b.WriteString(e.summary)
	keys := slices.Sorted(maps.Keys(e.attributes))
	for _, k := range keys {
		b.WriteString(" ")
		b.WriteString(k)
		b.WriteString(" ")
		b.WriteString(e.attributes[k])
	}
	return names, b.String()
}

func writeFTS(ctx context.Context, tx *sql.Tx, tenant string, e *entityRow, replace bool) error {
	if replace {
		if _, err := tx.ExecContext(ctx, `DELETE FROM entity_fts WHERE rowid = ?`, e.rid); err != nil {
			return fmt.Errorf("memory sqlite: fts: %w", err)
		}
	}
	names, body := ftsText(e)
	if _, err := tx.ExecContext(ctx, `INSERT INTO entity_fts (rowid, tk, name, body) VALUES (?, ?, ?, ?)`, e.rid, tenantToken(tenant), names, body); err != nil {
		return fmt.Errorf("memory sqlite: fts: %w", err)
	}
	return nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// CompleteEpisode writes what extraction made of an episode, in one
// transaction.
func (s *Store) CompleteEpisode(ctx context.Context, tenant, id, owner string, r store.IngestResult) (store.IngestOutcome, error) {
	for i, rel := range r.Relations {
		if rel.Source < 0 || rel.Source >= len(r.Entities) || rel.Target < 0 || rel.Target >= len(r.Entities) {
			return store.IngestOutcome{}, fmt.Errorf("memory sqlite: relation %d: entity index out of range", i)
		}
		if strings.TrimSpace(rel.Type) == "" {
			return store.IngestOutcome{}, fmt.Errorf("memory sqlite: relation %d: empty type", i)
		}
		if math.IsNaN(rel.Confidence) || rel.Confidence <= 0 {
			return store.IngestOutcome{}, fmt.Errorf("memory sqlite: relation %d: confidence %v not in (0, 1]", i, rel.Confidence)
		}
	}
	for i, e := range r.Entities {
		if e.MergeInto == "" && (strings.TrimSpace(e.Name) == "" || strings.TrimSpace(e.Type) == "") {
			return store.IngestOutcome{}, fmt.Errorf("memory sqlite: entity %d: a new entity needs a name and a type", i)
		}
	}
	var out store.IngestOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = store.IngestOutcome{}
		epRid, err := leased(ctx, tx, tenant, id, owner)
		if err != nil {
			return err
		}
		ts, err := s.loadTenant(ctx, tx, tenant)
		if err != nil {
			return err
		}
		now := s.o.Now()
		nowN := now.UnixNano()
		rids := make([]int64, len(r.Entities))
		changed := map[string]bool{}
		for i, x := range r.Entities {
			var e *entityRow
			if x.MergeInto != "" {
				if e, err = loadEntityRow(ctx, tx, tenant, x.MergeInto); err != nil {
					return err
				}
				if err := s.merge(ctx, tx, ts, tenant, e, x, nowN, changed); err != nil {
					return err
				}
			} else {
				e = &entityRow{id: newID("en_", now), name: strings.TrimSpace(x.Name), typ: strings.TrimSpace(x.Type), summary: x.Summary,
					attributes: maps.Clone(x.Attributes), aliases: []string{}, embedding: encodeVec(x.Embedding)}
				if e.attributes == nil {
					e.attributes = map[string]string{}
				}
				res, err := tx.ExecContext(ctx, `INSERT INTO entities (tenant, id, name, name_key, type, summary, attributes, aliases, embedding, created_at, updated_at, seq)
					VALUES (?, ?, ?, ?, ?, ?, ?, '[]', ?, ?, ?, ?)`,
					tenant, e.id, e.name, key(e.name), e.typ, e.summary, jsonText(e.attributes), e.embedding, nowN, nowN, ts.next())
				if err != nil {
					return fmt.Errorf("memory sqlite: insert entity: %w", err)
				}
				if e.rid, err = res.LastInsertId(); err != nil {
					return fmt.Errorf("memory sqlite: insert entity: %w", err)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO entity_names (tenant, key, entity_rid, is_alias) VALUES (?, ?, ?, 0)`, tenant, key(e.name), e.rid); err != nil {
					return fmt.Errorf("memory sqlite: entity name: %w", err)
				}
				if err := writeFTS(ctx, tx, tenant, e, false); err != nil {
					return err
				}
				out.CreatedIDs = append(out.CreatedIDs, e.id)
				changed[e.id] = true
			}
			rids[i] = e.rid
			out.EntityIDs = append(out.EntityIDs, e.id)
			res, err := tx.ExecContext(ctx, `INSERT INTO mentions (episode_rid, entity_rid) VALUES (?, ?) ON CONFLICT DO NOTHING`, epRid, e.rid)
			if err != nil {
				return fmt.Errorf("memory sqlite: mention: %w", err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				if _, err := tx.ExecContext(ctx, `UPDATE entities SET mention_count = mention_count + 1 WHERE rid = ?`, e.rid); err != nil {
					return fmt.Errorf("memory sqlite: mention: %w", err)
				}
			}
		}
		if s.testHook != nil {
			if err := s.testHook(ctx); err != nil {
				return err
			}
		}
		for _, rel := range r.Relations {
			src, tgt := rids[rel.Source], rids[rel.Target]
			if src == tgt {
				continue
			}
			rid, relID, err := s.upsertRelation(ctx, tx, tenant, src, tgt, out.EntityIDs[rel.Source], out.EntityIDs[rel.Target], rel, epRid, now)
			if err != nil {
				return err
			}
			if err := recomputeRelation(ctx, tx, rid, nowN); err != nil {
				return err
			}
			out.RelationIDs = append(out.RelationIDs, relID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE episodes SET status = 3, error = '', processed_at = ?, lease_owner = '', lease_until = 0 WHERE rid = ?`, nowN, epRid); err != nil {
			return fmt.Errorf("memory sqlite: complete episode: %w", err)
		}
		ts.dirty = len(r.Entities) > 0
		for _, id := range out.EntityIDs {
			if changed[id] && !slices.Contains(out.ChangedSummary, id) {
				out.ChangedSummary = append(out.ChangedSummary, id)
			}
		}
		return s.saveTenant(ctx, tx, ts)
	})
	if err != nil {
		return store.IngestOutcome{}, err
	}
	return out, nil
}

// merge folds an extracted entity into an existing one: its name becomes
// an alias, attributes merge (new values win), a new summary replaces the
// old, and an embedding is taken only when the entity had none.
func (s *Store) merge(ctx context.Context, tx *sql.Tx, ts *tenantState, tenant string, e *entityRow, x store.ExtractedEntity, nowN int64, changed map[string]bool) error {
	textChanged := false
	name := strings.TrimSpace(x.Name)
	if k := key(name); k != "" && k != key(e.name) && !slices.ContainsFunc(e.aliases, func(a string) bool { return key(a) == k }) {
		e.aliases = append(e.aliases, name)
		textChanged = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO entity_names (tenant, key, entity_rid, is_alias) VALUES (?, ?, ?, 1) ON CONFLICT DO NOTHING`, tenant, k, e.rid); err != nil {
			return fmt.Errorf("memory sqlite: alias: %w", err)
		}
	}
	summaryChanged := false
	for k, v := range x.Attributes {
		if old, ok := e.attributes[k]; !ok || old != v {
			if e.attributes == nil {
				e.attributes = map[string]string{}
			}
			e.attributes[k] = v
			summaryChanged = true
		}
	}
	if x.Summary != "" && x.Summary != e.summary {
		e.summary = x.Summary
		summaryChanged = true
	}
	seqSQL, args := "", []any{}
	if len(e.embedding) == 0 && len(x.Embedding) > 0 {
		e.embedding = encodeVec(x.Embedding)
		seqSQL = `, embedding = ?, seq = ?`
		args = append(args, e.embedding, ts.next())
	}
	if !textChanged && !summaryChanged && seqSQL == "" {
		return nil
	}
	args = append([]any{e.summary, jsonText(e.attributes), jsonText(e.aliases), nowN}, args...)
	args = append(args, e.rid)
	if _, err := tx.ExecContext(ctx, `UPDATE entities SET summary = ?, attributes = ?, aliases = ?, updated_at = ?`+seqSQL+` WHERE rid = ?`, args...); err != nil {
		return fmt.Errorf("memory sqlite: merge entity: %w", err)
	}
	if textChanged || summaryChanged {
		if err := writeFTS(ctx, tx, tenant, e, true); err != nil {
			return err
		}
	}
	if summaryChanged {
		changed[e.id] = true
	}
	return nil
}

func (s *Store) upsertRelation(ctx context.Context, tx *sql.Tx, tenant string, src, tgt int64, srcID, tgtID string,
	rel store.ExtractedRelation, epRid int64, now interface{ UnixNano() int64 }) (int64, string, error) {
	typ := strings.TrimSpace(rel.Type)
	conf := min(rel.Confidence, 1)
	var rid int64
	var id string
	err := tx.QueryRowContext(ctx, `SELECT rid, id FROM relations WHERE source_rid = ? AND target_rid = ? AND type = ?`, src, tgt, typ).Scan(&rid, &id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		id = newID("re_", s.o.Now())
		res, err := tx.ExecContext(ctx, `INSERT INTO relations (tenant, id, source_rid, target_rid, source_id, target_id, type, fact, weight, episode_count, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`, tenant, id, src, tgt, srcID, tgtID, typ, rel.Fact, conf, now.UnixNano())
		if err != nil {
			return 0, "", fmt.Errorf("memory sqlite: insert relation: %w", err)
		}
		if rid, err = res.LastInsertId(); err != nil {
			return 0, "", fmt.Errorf("memory sqlite: insert relation: %w", err)
		}
	case err != nil:
		return 0, "", fmt.Errorf("memory sqlite: relation: %w", err)
	default:
		if rel.Fact != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE relations SET fact = ? WHERE rid = ?`, rel.Fact, rid); err != nil {
				return 0, "", fmt.Errorf("memory sqlite: relation: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO relation_support (relation_rid, episode_rid, confidence) VALUES (?, ?, ?)
		ON CONFLICT (relation_rid, episode_rid) DO UPDATE SET confidence = max(confidence, excluded.confidence)`, rid, epRid, conf); err != nil {
		return 0, "", fmt.Errorf("memory sqlite: relation support: %w", err)
	}
	return rid, id, nil
}

// recomputeRelation sets a relation's weight (noisy-or of its supports'
// confidences) and episode count; a relation nothing supports is deleted
// (and true returned).
func recomputeRelation(ctx context.Context, tx *sql.Tx, rid int64, nowN int64) error {
	_, err := recompute(ctx, tx, rid, nowN)
	return err
}

func recompute(ctx context.Context, tx *sql.Tx, rid int64, nowN int64) (bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT confidence FROM relation_support WHERE relation_rid = ?`, rid)
	if err != nil {
		return false, fmt.Errorf("memory sqlite: relation support: %w", err)
	}
	miss, n := 1.0, 0
	for rows.Next() {
		var c float64
		if err := rows.Scan(&c); err != nil {
			_ = rows.Close()
			return false, fmt.Errorf("memory sqlite: relation support: %w", err)
		}
		miss *= 1 - c
		n++
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("memory sqlite: relation support: %w", err)
	}
	if n == 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM relations WHERE rid = ?`, rid); err != nil {
			return false, fmt.Errorf("memory sqlite: delete relation: %w", err)
		}
		return true, nil
	}
	q, args := `UPDATE relations SET weight = ?, episode_count = ? WHERE rid = ?`, []any{1 - miss, n, rid}
	if nowN != 0 {
		q, args = `UPDATE relations SET weight = ?, episode_count = ?, updated_at = ? WHERE rid = ?`, []any{1 - miss, n, nowN, rid}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return false, fmt.Errorf("memory sqlite: relation: %w", err)
	}
	return false, nil
}

// --- deletes ---------------------------------------------------------------

// deleteEntityTx removes an entity with its names, mentions, relations and
// text, leaving a vector tombstone; it returns the relations removed.
func (s *Store) deleteEntityTx(ctx context.Context, tx *sql.Tx, ts *tenantState, rid int64, id string) (int, error) {
	rels, err := int64s(ctx, tx, `SELECT rid FROM relations WHERE source_rid = ? UNION SELECT rid FROM relations WHERE target_rid = ?`, rid, rid)
	if err != nil {
		return 0, err
	}
	for _, r := range rels {
		if _, err := tx.ExecContext(ctx, `DELETE FROM relation_support WHERE relation_rid = ?`, r); err != nil {
			return 0, fmt.Errorf("memory sqlite: delete relation: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM relations WHERE rid = ?`, r); err != nil {
			return 0, fmt.Errorf("memory sqlite: delete relation: %w", err)
		}
	}
	for _, q := range []string{
		`DELETE FROM mentions WHERE entity_rid = ?`,
		`DELETE FROM entity_names WHERE entity_rid = ?`,
		`DELETE FROM entity_fts WHERE rowid = ?`,
		`DELETE FROM entities WHERE rid = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, rid); err != nil {
			return 0, fmt.Errorf("memory sqlite: delete entity: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO vector_tombstones (tenant, seq, id) VALUES (?, ?, ?)`, ts.name, ts.next(), id); err != nil {
		return 0, fmt.Errorf("memory sqlite: tombstone: %w", err)
	}
	ts.dirty = true
	return len(rels), nil
}

// pruneTombstones keeps the newest MaxTombstones of a tenant.
func (s *Store) pruneTombstones(ctx context.Context, tx *sql.Tx, ts *tenantState) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM vector_tombstones WHERE tenant = ?`, ts.name).Scan(&n); err != nil {
		return fmt.Errorf("memory sqlite: tombstones: %w", err)
	}
	if n <= s.o.MaxTombstones {
		return nil
	}
	var floor int64
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM vector_tombstones WHERE tenant = ? ORDER BY seq DESC LIMIT 1 OFFSET ?`, ts.name, s.o.MaxTombstones).Scan(&floor); err != nil {
		return fmt.Errorf("memory sqlite: tombstones: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM vector_tombstones WHERE tenant = ? AND seq <= ?`, ts.name, floor); err != nil {
		return fmt.Errorf("memory sqlite: tombstones: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tenants SET tomb_floor = ? WHERE tenant = ?`, floor, ts.name); err != nil {
		return fmt.Errorf("memory sqlite: tombstones: %w", err)
	}
	return nil
}

func int64s(ctx context.Context, q queryer, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("memory sqlite: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// deleteEpisodeTx removes one episode and what only it supported.
func (s *Store) deleteEpisodeTx(ctx context.Context, tx *sql.Tx, ts *tenantState, epRid int64) (store.DeleteOutcome, error) {
	out := store.DeleteOutcome{Episodes: 1}
	ents, err := int64s(ctx, tx, `SELECT entity_rid FROM mentions WHERE episode_rid = ?`, epRid)
	if err != nil {
		return out, err
	}
	rels, err := int64s(ctx, tx, `SELECT relation_rid FROM relation_support WHERE episode_rid = ?`, epRid)
	if err != nil {
		return out, err
	}
	if len(ents) > 0 || len(rels) > 0 {
		ts.dirty = true
	}
	for _, q := range []string{`DELETE FROM mentions WHERE episode_rid = ?`, `DELETE FROM relation_support WHERE episode_rid = ?`, `DELETE FROM episodes WHERE rid = ?`} {
		if _, err := tx.ExecContext(ctx, q, epRid); err != nil {
			return out, fmt.Errorf("memory sqlite: delete episode: %w", err)
		}
	}
	for _, r := range rels {
		gone, err := recompute(ctx, tx, r, 0)
		if err != nil {
			return out, err
		}
		if gone {
			out.Relations++
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i] < ents[j] })
	for _, e := range ents {
		var left int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mentions WHERE entity_rid = ?`, e).Scan(&left); err != nil {
			return out, fmt.Errorf("memory sqlite: mentions: %w", err)
		}
		if left > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE entities SET mention_count = ? WHERE rid = ?`, left, e); err != nil {
				return out, fmt.Errorf("memory sqlite: mentions: %w", err)
			}
			continue
		}
		var id string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM entities WHERE rid = ?`, e).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			return out, fmt.Errorf("memory sqlite: entity: %w", err)
		}
		n, err := s.deleteEntityTx(ctx, tx, ts, e, id)
		if err != nil {
			return out, err
		}
		out.Entities++
		out.Relations += n
	}
	return out, nil
}

// DeleteEpisode removes an episode and what only it supported.
func (s *Store) DeleteEpisode(ctx context.Context, tenant, id string) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var rid int64
		err := tx.QueryRowContext(ctx, `SELECT rid FROM episodes WHERE tenant = ? AND id = ?`, tenant, id).Scan(&rid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("episode", id)
		}
		if err != nil {
			return fmt.Errorf("memory sqlite: episode: %w", err)
		}
		ts, err := s.loadTenant(ctx, tx, tenant)
		if err != nil {
			return err
		}
		if out, err = s.deleteEpisodeTx(ctx, tx, ts, rid); err != nil {
			return err
		}
		return s.finishDelete(ctx, tx, ts)
	})
	if err != nil {
		return store.DeleteOutcome{}, err
	}
	s.eraseFreed(ctx)
	return out, nil
}

func (s *Store) finishDelete(ctx context.Context, tx *sql.Tx, ts *tenantState) error {
	if err := s.saveTenant(ctx, tx, ts); err != nil {
		return err
	}
	if ts.vecs {
		return s.pruneTombstones(ctx, tx, ts)
	}
	return nil
}

// DeleteConversation deletes every episode and interaction trace of a
// conversation.
func (s *Store) DeleteConversation(ctx context.Context, tenant, conversationID string) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	if conversationID == "" {
		return out, nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = store.DeleteOutcome{}
		traces, err := deleteConversationTraces(ctx, tx, tenant, conversationID)
		if err != nil {
			return err
		}
		out.Traces = traces
		eps, err := int64s(ctx, tx, `SELECT rid FROM episodes WHERE tenant = ? AND conversation_id = ?`, tenant, conversationID)
		if err != nil || len(eps) == 0 {
			return err
		}
		ts, err := s.loadTenant(ctx, tx, tenant)
		if err != nil {
			return err
		}
		for _, rid := range eps {
			o, err := s.deleteEpisodeTx(ctx, tx, ts, rid)
			if err != nil {
				return err
			}
			out.Episodes += o.Episodes
			out.Entities += o.Entities
			out.Relations += o.Relations
		}
		return s.finishDelete(ctx, tx, ts)
	})
	if err != nil {
		return store.DeleteOutcome{}, err
	}
	s.eraseFreed(ctx)
	return out, nil
}

// DeleteEntity removes an entity with its relations and mentions.
func (s *Store) DeleteEntity(ctx context.Context, tenant, id string) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var rid int64
		err := tx.QueryRowContext(ctx, `SELECT rid FROM entities WHERE +tenant = ? AND id = ?`, tenant, id).Scan(&rid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("entity", id)
		}
		if err != nil {
			return fmt.Errorf("memory sqlite: entity: %w", err)
		}
		ts, err := s.loadTenant(ctx, tx, tenant)
		if err != nil {
			return err
		}
		n, err := s.deleteEntityTx(ctx, tx, ts, rid, id)
		if err != nil {
			return err
		}
		out = store.DeleteOutcome{Entities: 1, Relations: n}
		return s.finishDelete(ctx, tx, ts)
	})
	if err != nil {
		return store.DeleteOutcome{}, err
	}
	s.eraseFreed(ctx)
	return out, nil
}

// eraseFreed makes deleted content unreadable from the files: the pages a
// delete freed are zeroed (secure_delete, set when the store opens), and a
// checkpoint copies them into the database file and truncates the
// write-ahead log, whose older frames still hold the rows as they were.
// A checkpoint that readers hold back is done by a later one; failures
// are logged, not returned: the delete itself is committed.
func (s *Store) eraseFreed(ctx context.Context) {
	var busy, logFrames, checkpointed int
	err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &checkpointed)
	if err != nil || busy != 0 {
		s.o.Logger.WarnContext(ctx, "memory sqlite: the checkpoint after a delete did not complete; a later one erases the deleted rows from the log",
			"err", err, "busy", busy != 0)
	}
}
