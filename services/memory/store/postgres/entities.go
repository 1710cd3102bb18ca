package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/services/memory/store"
)

const entityCols = `tenant, id, name, type, summary, attributes, aliases, embedding, mention_count,
	community_id, created_at, updated_at`

func scanEntity(row pgx.Row) (*store.Entity, error) {
	var e store.Entity
	err := row.Scan(&e.Tenant, &e.ID, &e.Name, &e.Type, &e.Summary, &e.Attributes, &e.Aliases, &e.Embedding,
		&e.MentionCount, &e.CommunityID, &e.CreatedAt, &e.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if e.Attributes == nil {
		e.Attributes = map[string]string{}
	}
	return &e, nil
}

func collectEntities(rows pgx.Rows) ([]*store.Entity, error) {
	defer rows.Close()
	var out []*store.Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// attrText is the attributes as searchable text: "key value" pairs in key
// order.
func attrText(attrs map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		b.WriteString(k)
		b.WriteByte(' ')
		b.WriteString(attrs[k])
		b.WriteByte(' ')
	}
	return b.String()
}

// clampConfidence maps a relation's confidence into (0, 1].
func clampConfidence(c float64) float64 {
	switch {
	case math.IsNaN(c) || c <= 0:
		return 0.01
	case c > 1:
		return 1
	}
	return max(c, 0.01)
}

// CompleteEpisode writes what extraction made of an episode and marks it
// synced, in one transaction.
func (s *Store) CompleteEpisode(ctx context.Context, tenant, id, owner string, r store.IngestResult) (store.IngestOutcome, error) {
	for i, e := range r.Entities {
		if strings.TrimSpace(e.Name) == "" || strings.TrimSpace(e.Type) == "" {
			return store.IngestOutcome{}, fmt.Errorf("memory store: entity %d needs a name and a type", i)
		}
		if !validText(e.Name, e.Type, e.Summary) {
			return store.IngestOutcome{}, fmt.Errorf("memory store: entity %d: %w", i, errInvalidText)
		}
		if !validText(e.MergeInto) {
			return store.IngestOutcome{}, notFound("entity", e.MergeInto)
		}
		for k, v := range e.Attributes {
			if !validText(k, v) {
				return store.IngestOutcome{}, fmt.Errorf("memory store: entity %d attribute: %w", i, errInvalidText)
			}
		}
	}
	for i, rel := range r.Relations {
		if rel.Source < 0 || rel.Source >= len(r.Entities) || rel.Target < 0 || rel.Target >= len(r.Entities) {
			return store.IngestOutcome{}, fmt.Errorf("memory store: relation %d points outside the entities", i)
		}
		if strings.TrimSpace(rel.Type) == "" {
			return store.IngestOutcome{}, fmt.Errorf("memory store: relation %d needs a type", i)
		}
		if !validText(rel.Type, rel.Fact) {
			return store.IngestOutcome{}, fmt.Errorf("memory store: relation %d: %w", i, errInvalidText)
		}
	}
	start := time.Now()
	var out store.IngestOutcome
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = store.IngestOutcome{}
		if err := lockLeased(ctx, tx, tenant, id, owner); err != nil {
			return err
		}
		seq, err := bumpTenant(ctx, tx, tenant, true)
		if err != nil {
			return err
		}
		now := time.Now()
		changed := map[string]bool{}
		created := map[string]bool{}
		for _, x := range r.Entities {
			eid, isNew, didChange, err := s.writeEntity(ctx, tx, tenant, x, seq, now)
			if err != nil {
				return err
			}
			out.EntityIDs = append(out.EntityIDs, eid)
			if isNew && !created[eid] {
				created[eid] = true
				out.CreatedIDs = append(out.CreatedIDs, eid)
			}
			if didChange && !created[eid] && !changed[eid] {
				changed[eid] = true
				out.ChangedSummary = append(out.ChangedSummary, eid)
			}
		}
		// MENTIONS, once per entity, and the mention counts.
		distinct := uniq(out.EntityIDs)
		if len(distinct) > 0 {
			if _, err := tx.Exec(ctx, `
INSERT INTO memory_mentions (tenant, episode_id, entity_id, pos)
SELECT $1, $2, x.id, x.pos FROM unnest($3::text[]) WITH ORDINALITY AS x(id, pos)
ON CONFLICT DO NOTHING`, tenant, id, distinct); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE memory_entities SET mention_count = mention_count + 1
				WHERE tenant = $1 AND id = ANY($2)`, tenant, distinct); err != nil {
				return err
			}
		}
		out.RelationIDs, err = writeRelations(ctx, tx, tenant, id, out.EntityIDs, r.Relations, now)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE memory_episodes
SET status = $3, error = '', lease_owner = '', lease_until = NULL, processed_at = clock_timestamp()
WHERE tenant = $1 AND id = $2`, tenant, id, int32(store.StatusSynced))
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return store.IngestOutcome{}, err
		}
		return store.IngestOutcome{}, fmt.Errorf("memory store: complete episode: %w", err)
	}
	s.metrics.completeSeconds.Observe(time.Since(start).Seconds())
	if s.pgvector {
		for _, e := range r.Entities {
			s.ensureHNSW(ctx, len(e.Embedding))
		}
	}
	return out, nil
}

// writeEntity creates an extracted entity or merges it into the existing
// one (by MergeInto, else by type and case-insensitive name) and says
// whether it was new and whether an existing one's summary or attributes
// changed. A concurrent creator of the same name is met by the unique
// index: the insert does nothing and the row it committed is merged into.
func (s *Store) writeEntity(ctx context.Context, tx pgx.Tx, tenant string, x store.ExtractedEntity, seq int64, now time.Time) (id string, isNew, changed bool, err error) {
	name, typ := strings.TrimSpace(x.Name), strings.TrimSpace(x.Type)
	attrs := x.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	var cur *store.Entity
	if x.MergeInto != "" {
		cur, err = scanEntity(tx.QueryRow(ctx, `SELECT `+entityCols+` FROM memory_entities
			WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, x.MergeInto))
		if errors.Is(err, pgx.ErrNoRows) {
			return "", false, false, notFound("entity", x.MergeInto)
		}
		if err != nil {
			return "", false, false, err
		}
	}
	if cur == nil {
		newID := newID("en_")
		err = tx.QueryRow(ctx, `
INSERT INTO memory_entities (tenant, id, name, type, summary, attributes, attr_text, embedding,
	created_at, updated_at, seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)
ON CONFLICT (tenant, type, lower(name)) DO NOTHING
RETURNING id`, tenant, newID, name, typ, x.Summary, attrs, attrText(attrs), embeddingArg(x.Embedding), now, seq).Scan(&id)
		if err == nil {
			if s.pgvector && len(x.Embedding) > 0 {
				if err := s.setVector(ctx, tx, tenant, id, x.Embedding); err != nil {
					return "", false, false, err
				}
			}
			return id, true, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return "", false, false, err
		}
		cur, err = scanEntity(tx.QueryRow(ctx, `SELECT `+entityCols+` FROM memory_entities
			WHERE tenant = $1 AND type = $2 AND lower(name) = lower($3) FOR UPDATE`, tenant, typ, name))
		if err != nil {
			return "", false, false, err
		}
	}
	// Merge into cur.
	aliases := cur.Aliases
	if !strings.EqualFold(name, cur.Name) && !slices.ContainsFunc(aliases, func(a string) bool { return strings.EqualFold(a, name) }) {
		aliases = append(aliases, name)
	}
	merged := maps.Clone(cur.Attributes)
	for k, v := range attrs {
		if merged[k] != v {
			merged[k] = v
			changed = true
		}
	}
	summary := cur.Summary
	if x.Summary != "" && x.Summary != cur.Summary {
		summary = x.Summary
		changed = true
	}
	emb := cur.Embedding
	if len(emb) == 0 && len(x.Embedding) > 0 {
		emb = x.Embedding
	}
	if aliases == nil {
		aliases = []string{}
	}
	_, err = tx.Exec(ctx, `
UPDATE memory_entities SET summary = $3, attributes = $4, attr_text = $5, aliases = $6, aliases_lower = $7,
	alias_text = $8, embedding = $9, updated_at = $10, seq = $11
WHERE tenant = $1 AND id = $2`, tenant, cur.ID, summary, merged, attrText(merged), aliases, lowerAll(aliases),
		strings.Join(aliases, " "), embeddingArg(emb), now, seq)
	if err != nil {
		return "", false, false, err
	}
	if s.pgvector && len(cur.Embedding) == 0 && len(emb) > 0 {
		if err := s.setVector(ctx, tx, tenant, cur.ID, emb); err != nil {
			return "", false, false, err
		}
	}
	return cur.ID, false, changed, nil
}

// embeddingArg is an embedding as a real[] argument: NULL when empty.
func embeddingArg(v []float32) any {
	if len(v) == 0 {
		return nil
	}
	return v
}

type relKey struct {
	src, dst, typ string
}

// writeRelations upserts the episode's relations (repeats within the
// episode counted once, at their best confidence) and records the episode
// as their support, then recomputes their weights from it.
func writeRelations(ctx context.Context, tx pgx.Tx, tenant, episodeID string, entityIDs []string, rels []store.ExtractedRelation, now time.Time) ([]string, error) {
	type agg struct {
		fact string
		conf float64
	}
	byKey := map[relKey]*agg{}
	var order []relKey
	for _, r := range rels {
		src, dst := entityIDs[r.Source], entityIDs[r.Target]
		if src == dst {
			continue // no self loops
		}
		k := relKey{src, dst, strings.TrimSpace(r.Type)}
		c := clampConfidence(r.Confidence)
		if a := byKey[k]; a != nil {
			if c > a.conf {
				a.conf = c
			}
			if a.fact == "" {
				a.fact = r.Fact
			}
			continue
		}
		byKey[k] = &agg{fact: r.Fact, conf: c}
		order = append(order, k)
	}
	ids := make([]string, 0, len(order))
	for _, k := range order {
		a := byKey[k]
		var rid string
		err := tx.QueryRow(ctx, `
INSERT INTO memory_relations (tenant, id, source_id, target_id, type, fact, weight, episode_count, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8)
ON CONFLICT (tenant, source_id, target_id, type) DO UPDATE SET
	fact = CASE WHEN EXCLUDED.fact <> '' THEN EXCLUDED.fact ELSE memory_relations.fact END,
	updated_at = EXCLUDED.updated_at
RETURNING id`, tenant, newID("re_"), k.src, k.dst, k.typ, a.fact, a.conf, now).Scan(&rid)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memory_relation_episodes (tenant, relation_id, episode_id, confidence)
			VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, relation_id, episode_id)
			DO UPDATE SET confidence = greatest(memory_relation_episodes.confidence, EXCLUDED.confidence)`,
			tenant, rid, episodeID, a.conf); err != nil {
			return nil, err
		}
		if err := recomputeRelations(ctx, tx, tenant, []string{rid}); err != nil {
			return nil, err
		}
		ids = append(ids, rid)
	}
	return ids, nil
}

// GetEntity reads one entity.
func (s *Store) GetEntity(ctx context.Context, tenant, id string) (*store.Entity, error) {
	if !validText(tenant, id) {
		return nil, notFound("entity", id)
	}
	e, err := scanEntity(s.pool.QueryRow(ctx, `SELECT `+entityCols+` FROM memory_entities
		WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("entity", id)
	}
	if err != nil {
		return nil, fmt.Errorf("memory store: get entity: %w", err)
	}
	return e, nil
}

// GetEntities reads many entities, in the order of ids; missing ones are
// left out.
func (s *Store) GetEntities(ctx context.Context, tenant string, ids []string) ([]*store.Entity, error) {
	ids = validIDs(ids)
	if len(ids) == 0 || !validText(tenant) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entityCols+` FROM memory_entities
		WHERE tenant = $1 AND id = ANY($2)`, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("memory store: get entities: %w", err)
	}
	es, err := collectEntities(rows)
	if err != nil {
		return nil, fmt.Errorf("memory store: get entities: %w", err)
	}
	byID := make(map[string]*store.Entity, len(es))
	for _, e := range es {
		byID[e.ID] = e
	}
	out := make([]*store.Entity, 0, len(es))
	for _, id := range uniq(ids) {
		if e := byID[id]; e != nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// FindEntity finds an entity by exact name or alias, case-insensitive; an
// exact name beats an alias, then the most mentioned wins.
func (s *Store) FindEntity(ctx context.Context, tenant, name, typ string) (*store.Entity, error) {
	name = strings.TrimSpace(name)
	if name == "" || !validText(tenant, name, typ) {
		return nil, notFound("entity named", name)
	}
	e, err := scanEntity(s.pool.QueryRow(ctx, `SELECT `+entityCols+` FROM memory_entities
WHERE tenant = $1 AND ($3 = '' OR type = $3)
	AND (lower(name) = lower($2) OR aliases_lower @> ARRAY[lower($2)])
ORDER BY (lower(name) = lower($2)) DESC, mention_count DESC, id
LIMIT 1`, tenant, name, strings.TrimSpace(typ)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("entity named", name)
	}
	if err != nil {
		return nil, fmt.Errorf("memory store: find entity: %w", err)
	}
	return e, nil
}

// ListEntities lists a tenant's entities by name (case-insensitive), then
// id.
func (s *Store) ListEntities(ctx context.Context, tenant string, f store.EntityFilter, p store.Page) ([]*store.Entity, string, error) {
	size := pageSize(p.Size)
	if !validText(tenant, f.Type, f.NamePrefix) {
		return nil, "", nil
	}
	var (
		afterSet        bool
		afterKey, after string
	)
	if p.Token != "" {
		k, id, err := decodeToken(p.Token)
		if err != nil {
			return nil, "", err
		}
		if !validText(k, id) {
			return nil, "", errBadToken
		}
		afterSet, afterKey, after = true, k, id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entityCols+` FROM memory_entities
WHERE tenant = $1
	AND ($2 = '' OR type = $2)
	AND ($3 = '' OR starts_with(lower(name), lower($3)))
	AND (NOT $4 OR (lower(name), id) > ($5, $6))
ORDER BY lower(name), id
LIMIT $7`, tenant, strings.TrimSpace(f.Type), f.NamePrefix, afterSet, afterKey, after, size+1)
	if err != nil {
		return nil, "", fmt.Errorf("memory store: list entities: %w", err)
	}
	es, err := collectEntities(rows)
	if err != nil {
		return nil, "", fmt.Errorf("memory store: list entities: %w", err)
	}
	next := ""
	if len(es) > size {
		es = es[:size]
		last := es[size-1]
		next = encodeToken(strings.ToLower(last.Name), last.ID)
	}
	return es, next, nil
}

// DeleteEntity deletes an entity, its relations and its mentions.
func (s *Store) DeleteEntity(ctx context.Context, tenant, id string) (store.DeleteOutcome, error) {
	var out store.DeleteOutcome
	if !validText(tenant, id) {
		return out, notFound("entity", id)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The tenant row first, then entity rows, as every graph write
		// does, so that writers never wait on each other in a cycle.
		seq, err := bumpTenant(ctx, tx, tenant, true)
		if err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT true FROM memory_entities WHERE tenant = $1 AND id = $2 FOR UPDATE`,
			tenant, id).Scan(&exists); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound("entity", id)
			}
			return err
		}
		if out.Relations, err = deleteRelationsOf(ctx, tx, tenant, []string{id}); err != nil {
			return err
		}
		out.Entities, err = deleteEntityRows(ctx, tx, tenant, []string{id}, seq)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.DeleteOutcome{}, fmt.Errorf("memory store: delete entity: %w", err)
	}
	return out, err
}

// recomputeRelations sets the relations' EpisodeCount to their supporting
// episodes and Weight to the noisy-or of those episodes' confidences,
// 1 - Π(1 - c), which stays in (0, 1] and rises with support.
func recomputeRelations(ctx context.Context, tx pgx.Tx, tenant string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
UPDATE memory_relations r SET episode_count = x.n,
	weight = CASE WHEN x.certain THEN 1 ELSE 1 - exp(x.log_miss) END
FROM (
	SELECT relation_id, count(*) AS n, bool_or(confidence >= 1) AS certain,
		sum(ln(1 - least(confidence, 0.999999))) AS log_miss
	FROM memory_relation_episodes WHERE tenant = $1 AND relation_id = ANY($2)
	GROUP BY relation_id
) x
WHERE r.tenant = $1 AND r.id = x.relation_id`, tenant, ids)
	return err
}

const relationCols = `tenant, id, source_id, target_id, type, fact, weight, episode_count, updated_at`

func scanRelation(row pgx.Row) (*store.Relation, error) {
	var r store.Relation
	if err := row.Scan(&r.Tenant, &r.ID, &r.SourceID, &r.TargetID, &r.Type, &r.Fact, &r.Weight,
		&r.EpisodeCount, &r.UpdatedAt); err != nil {
		return nil, err
	}
	return &r, nil
}

func collectRelations(rows pgx.Rows) ([]*store.Relation, error) {
	defer rows.Close()
	var out []*store.Relation
	for rows.Next() {
		r, err := scanRelation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Relations returns the relations of the entities, either direction, at
// most limit per entity, strongest first.
func (s *Store) Relations(ctx context.Context, tenant string, entityIDs []string, limit int) ([]*store.Relation, error) {
	entityIDs = validIDs(entityIDs)
	if len(entityIDs) == 0 || limit <= 0 || !validText(tenant) {
		return nil, nil
	}
	limit = min(limit, 1000)
	rows, err := s.pool.Query(ctx, `
SELECT DISTINCT ON (r.id) r.tenant, r.id, r.source_id, r.target_id, r.type, r.fact, r.weight, r.episode_count, r.updated_at
FROM unnest($2::text[]) AS e(id)
CROSS JOIN LATERAL (
	SELECT * FROM (
		(SELECT * FROM memory_relations WHERE tenant = $1 AND source_id = e.id ORDER BY weight DESC, id LIMIT $3)
		UNION ALL
		(SELECT * FROM memory_relations WHERE tenant = $1 AND target_id = e.id ORDER BY weight DESC, id LIMIT $3)
	) both_ways ORDER BY weight DESC, id LIMIT $3
) r`, tenant, uniq(entityIDs), limit)
	if err != nil {
		return nil, fmt.Errorf("memory store: relations: %w", err)
	}
	out, err := collectRelations(rows)
	if err != nil {
		return nil, fmt.Errorf("memory store: relations: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Weight != out[j].Weight {
			return out[i].Weight > out[j].Weight
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// EntityEpisodes is the newest episodes mentioning the entity.
func (s *Store) EntityEpisodes(ctx context.Context, tenant, entityID string, limit int) ([]*store.Episode, error) {
	if limit <= 0 || !validText(tenant, entityID) {
		return nil, nil
	}
	limit = min(limit, 500)
	rows, err := s.pool.Query(ctx, `
SELECT e.tenant, e.id, e.source, e.content, e.conversation_id, e.run_id, e.idempotency_key,
	e.created_at, e.status, e.error, e.attempts, e.redactions, e.processed_at
FROM memory_mentions m JOIN memory_episodes e ON e.tenant = m.tenant AND e.id = m.episode_id
WHERE m.tenant = $1 AND m.entity_id = $2
ORDER BY e.created_at DESC, e.id DESC
LIMIT $3`, tenant, entityID, limit)
	if err != nil {
		return nil, fmt.Errorf("memory store: entity episodes: %w", err)
	}
	eps, err := collectEpisodes(rows)
	if err != nil {
		return nil, fmt.Errorf("memory store: entity episodes: %w", err)
	}
	if err := fillMentions(ctx, s.pool, tenant, eps); err != nil {
		return nil, fmt.Errorf("memory store: entity episodes: %w", err)
	}
	return eps, nil
}
