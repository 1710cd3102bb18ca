package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/baagent/baagent/services/memory/store"
	"github.com/baagent/baagent/services/memory/vecindex"
)

const entityCols = `rid, tenant, id, name, type, summary, attributes, aliases, embedding, mention_count, community_id, created_at, updated_at`

func scanEntity(sc interface{ Scan(...any) error }) (*store.Entity, int64, error) {
	var e store.Entity
	var rid, created, updated int64
	var attrs, aliases string
	var emb []byte
	if err := sc.Scan(&rid, &e.Tenant, &e.ID, &e.Name, &e.Type, &e.Summary, &attrs, &aliases, &emb, &e.MentionCount, &e.CommunityID, &created, &updated); err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal([]byte(attrs), &e.Attributes); err != nil {
		return nil, 0, fmt.Errorf("entity %s attributes: %w", e.ID, err)
	}
	if err := json.Unmarshal([]byte(aliases), &e.Aliases); err != nil {
		return nil, 0, fmt.Errorf("entity %s aliases: %w", e.ID, err)
	}
	e.Embedding = decodeVec(emb)
	e.CreatedAt, e.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &e, rid, nil
}

func (s *Store) queryEntities(ctx context.Context, query string, args ...any) ([]*store.Entity, []int64, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("memory sqlite: entities: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var es []*store.Entity
	var rids []int64
	for rows.Next() {
		e, rid, err := scanEntity(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("memory sqlite: entities: %w", err)
		}
		es = append(es, e)
		rids = append(rids, rid)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("memory sqlite: entities: %w", err)
	}
	return es, rids, nil
}

// GetEntity reads one entity.
func (s *Store) GetEntity(ctx context.Context, tenant, id string) (*store.Entity, error) {
	es, _, err := s.queryEntities(ctx, `SELECT `+entityCols+` FROM entities WHERE +tenant = ? AND id = ?`, tenant, id)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, notFound("entity", id)
	}
	return es[0], nil
}

// GetEntities reads many, in the order asked; missing ids are left out.
func (s *Store) GetEntities(ctx context.Context, tenant string, ids []string) ([]*store.Entity, error) {
	byID := map[string]*store.Entity{}
	for _, part := range chunks(ids, 500) {
		args := []any{tenant}
		for _, id := range part {
			args = append(args, id)
		}
		es, _, err := s.queryEntities(ctx, `SELECT `+entityCols+` FROM entities WHERE +tenant = ? AND id IN (`+placeholders(len(part))+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			byID[e.ID] = e
		}
	}
	out := make([]*store.Entity, 0, len(byID))
	for _, id := range ids {
		if e := byID[id]; e != nil {
			out = append(out, e)
			delete(byID, id)
		}
	}
	return out, nil
}

// FindEntity finds an entity by name or alias, case-insensitively; a name
// match beats an alias match, then the most mentioned wins.
func (s *Store) FindEntity(ctx context.Context, tenant, name, typ string) (*store.Entity, error) {
	q := `SELECT ` + prefixed("e.", entityCols) + ` FROM entity_names n JOIN entities e ON e.rid = n.entity_rid
		WHERE n.tenant = ? AND n.key = ? AND e.tenant = ?`
	args := []any{tenant, key(name), tenant}
	if typ != "" {
		q += ` AND e.type = ?`
		args = append(args, typ)
	}
	q += ` ORDER BY n.is_alias, e.mention_count DESC, e.rid LIMIT 1`
	es, _, err := s.queryEntities(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, notFound("entity named", name)
	}
	return es[0], nil
}

// ListEntities is by lower-cased name, then id.
func (s *Store) ListEntities(ctx context.Context, tenant string, f store.EntityFilter, p store.Page) ([]*store.Entity, string, error) {
	cur, err := decodeCursor(p.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(p)
	q := `SELECT ` + entityCols + ` FROM entities WHERE tenant = ?`
	args := []any{tenant}
	if f.Type != "" {
		q += ` AND type = ?`
		args = append(args, f.Type)
	}
	if pre := key(f.NamePrefix); pre != "" {
		// A range on the key: literal, no pattern characters.
		q += ` AND name_key >= ? AND name_key < ?`
		args = append(args, pre, pre+"\U0010FFFF")
	}
	if cur != nil {
		q += ` AND (name_key > ? OR (name_key = ? AND id > ?))`
		args = append(args, cur.K, cur.K, cur.I)
	}
	q += ` ORDER BY name_key, id LIMIT ?`
	args = append(args, size+1)
	es, _, err := s.queryEntities(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(es) > size {
		es = es[:size]
		last := es[size-1]
		next = encodeCursor(cursor{K: key(last.Name), I: last.ID})
	}
	return es, next, nil
}

const relationCols = `rid, tenant, id, source_id, target_id, type, fact, weight, episode_count, updated_at`

func scanRelation(sc interface{ Scan(...any) error }) (*store.Relation, int64, error) {
	var r store.Relation
	var rid, updated int64
	if err := sc.Scan(&rid, &r.Tenant, &r.ID, &r.SourceID, &r.TargetID, &r.Type, &r.Fact, &r.Weight, &r.EpisodeCount, &updated); err != nil {
		return nil, 0, err
	}
	r.UpdatedAt = fromNanos(updated)
	return &r, rid, nil
}

func (s *Store) queryRelations(ctx context.Context, query string, args ...any) ([]*store.Relation, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: relations: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []*store.Relation
	for rows.Next() {
		r, _, err := scanRelation(rows)
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: relations: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Relations of the entities, either direction, strongest first, at most
// limit per entity.
func (s *Store) Relations(ctx context.Context, tenant string, entityIDs []string, limit int) ([]*store.Relation, error) {
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, 1000)
	seen := map[string]bool{}
	var out []*store.Relation
	for _, id := range entityIDs {
		if seen["e:"+id] {
			continue
		}
		seen["e:"+id] = true
		rs, err := s.queryRelations(ctx, `SELECT `+relationCols+` FROM (
				SELECT r.* FROM entities e JOIN relations r ON r.source_rid = e.rid WHERE +e.tenant = ? AND e.id = ?
				UNION ALL
				SELECT r.* FROM entities e JOIN relations r ON r.target_rid = e.rid WHERE +e.tenant = ? AND e.id = ?)
			WHERE tenant = ? ORDER BY weight DESC, id LIMIT ?`, tenant, id, tenant, id, tenant, limit)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Weight != out[j].Weight {
			return out[i].Weight > out[j].Weight
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// --- search ----------------------------------------------------------------

// VectorSearch is the k entities nearest to vec (cosine).
func (s *Store) VectorSearch(ctx context.Context, tenant string, vec []float32, k int, types []string) ([]store.Scored, error) {
	if k <= 0 {
		return nil, nil
	}
	hits, err := s.idx.Search(ctx, tenant, vec, min(k, 1000), types)
	if err != nil {
		return nil, err
	}
	out := make([]store.Scored, len(hits))
	for i, h := range hits {
		out[i] = store.Scored{ID: h.ID, Score: h.Score}
	}
	return out, nil
}

// maxTerms bounds the words of a keyword query.
const maxTerms = 32

// stopWords are English function words, left out of keyword queries when
// the query has other words: they match nearly every summary, and ranking
// every row that has "the" costs time and says nothing.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
		before being below between both but by can could did do does doing down during each few for from further
		had has have having he her here hers herself him himself his how i if in into is it its itself just me
		more most my myself no nor not now of off on once only or other our ours ourselves out over own same she
		should so some such than that the their theirs them themselves then there these they this those through
		to too under until up very was we were what when where which while who whom why will with would you your
		yours yourself yourselves`) {
		m[w] = true
	}
	return m
}()

// ftsQuery turns user text into an FTS5 query over the name and body
// columns matching any of its words: each word is quoted, so nothing in
// the text is syntax. It is empty when the text has no words.
func ftsQuery(text string) string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	content := slices.ContainsFunc(words, func(w string) bool { return !stopWords[w] })
	seen := map[string]bool{}
	var terms []string
	for _, w := range words {
		if seen[w] || len(terms) == maxTerms || (content && stopWords[w]) {
			continue
		}
		seen[w] = true
		terms = append(terms, `"`+w+`"`)
	}
	if len(terms) == 0 {
		return ""
	}
	return "{name body} : (" + strings.Join(terms, " OR ") + ")"
}

// KeywordSearch is full-text search (bm25) over names, aliases, summaries
// and attributes, matching any of the query's words.
func (s *Store) KeywordSearch(ctx context.Context, tenant, query string, k int, types []string) ([]store.Scored, error) {
	if k <= 0 {
		return nil, nil
	}
	fq := ftsQuery(query)
	if fq == "" {
		return nil, nil
	}
	k = min(k, 1000)
	match := `tk : "` + tenantToken(tenant) + `" AND ` + fq
	// The best candidates come from the FTS table alone (ranking there is
	// cheap; joining every match is not); the join re-checks the tenant
	// and filters types. With a type filter the candidates may run short:
	// then the search is repeated over all matches.
	run := func(candidates int) ([]store.Scored, error) {
		q := `SELECT e.id, -f.score FROM (SELECT rowid, bm25(entity_fts, 0, 2.0, 1.0) AS score FROM entity_fts
			WHERE entity_fts MATCH ? ORDER BY score LIMIT ?) f JOIN entities e ON e.rid = f.rowid WHERE +e.tenant = ?`
		args := []any{match, candidates, tenant}
		if len(types) > 0 {
			q += ` AND e.type IN (` + placeholders(len(types)) + `)`
			for _, t := range types {
				args = append(args, t)
			}
		}
		q += ` ORDER BY f.score, e.id LIMIT ?`
		args = append(args, k)
		return s.keywordRows(ctx, q, args...)
	}
	if len(types) == 0 {
		return run(k)
	}
	out, err := run(k * 8)
	if err != nil || len(out) >= k {
		return out, err
	}
	return run(-1) // no limit
}

// keywordRows runs a keyword query.
func (s *Store) keywordRows(ctx context.Context, q string, args ...any) ([]store.Scored, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []store.Scored
	for rows.Next() {
		var h store.Scored
		if err := rows.Scan(&h.ID, &h.Score); err != nil {
			return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// --- vectors for the index -------------------------------------------------

// vecSource feeds the vector index from the entities table.
type vecSource struct{ s *Store }

func (v vecSource) Seq(ctx context.Context, tenant string) (int64, error) {
	var seq int64
	err := v.s.r.QueryRowContext(ctx, `SELECT seq FROM tenants WHERE tenant = ?`, tenant).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

func (v vecSource) Snapshot(ctx context.Context, tenant, afterID string, limit int) ([]vecindex.Change, error) {
	rows, err := v.s.r.QueryContext(ctx, `SELECT seq, id, type, embedding FROM entities WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?`, tenant, afterID, limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []vecindex.Change
	for rows.Next() {
		var c vecindex.Change
		var emb []byte
		if err := rows.Scan(&c.Seq, &c.ID, &c.Type, &emb); err != nil {
			return nil, err
		}
		c.Vec = decodeVec(emb)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (v vecSource) Changes(ctx context.Context, tenant string, since int64, limit int) ([]vecindex.Change, int64, error) {
	tx, err := v.s.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var cur, floor int64
	err = tx.QueryRowContext(ctx, `SELECT seq, tomb_floor FROM tenants WHERE tenant = ?`, tenant).Scan(&cur, &floor)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if since < floor {
		return nil, 0, vecindex.ErrTooOld
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, type, embedding FROM entities WHERE tenant = ? AND seq > ?
		UNION ALL SELECT seq, id, '', NULL FROM vector_tombstones WHERE tenant = ? AND seq > ?
		ORDER BY 1 LIMIT ?`, tenant, since, tenant, since, limit)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = rows.Close() }()
	var out []vecindex.Change
	for rows.Next() {
		var c vecindex.Change
		var emb []byte
		if err := rows.Scan(&c.Seq, &c.ID, &c.Type, &emb); err != nil {
			return nil, 0, err
		}
		c.Vec = decodeVec(emb)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) == limit {
		return out, out[len(out)-1].Seq, nil
	}
	return out, cur, nil
}
