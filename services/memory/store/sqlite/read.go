package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// ftsTerms are the words of user text that a keyword query matches:
// letters and digits, lower-cased, stop words left out when the text has
// other words, at most maxTerms.
func ftsTerms(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	content := slices.ContainsFunc(words, func(w string) bool { return !stopWords[w] })
	seen := map[string]bool{}
	var terms []string
	for _, w := range words {
		if seen[w] || len(terms) == maxTerms || (content && stopWords[w]) {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
	}
	return terms
}

// termMatch is the FTS5 query for one word of a tenant's entities: the
// word is quoted and holds only letters and digits, so it is never syntax.
func termMatch(tok, term string) string {
	return `tk : "` + tok + `" AND {name body} : "` + term + `"`
}

// rankBudget is how many of the matching entities a keyword search scores
// in full (the best by the rarity of the words they hold).
var rankBudget = 250 // a variable for tests

// BM25 parameters (FTS5's); names weigh twice the rest.
const (
	bm25K1     = 1.2
	bm25B      = 0.75
	nameWeight = 2.0
)

// KeywordSearch is full-text search over names, aliases, summaries and
// attributes, matching any of the query's words, ranked by BM25 with the
// tenant's own statistics. FTS5 finds the matches (one pass per word, on
// the tenant's token); when more than rankBudget entities match, the
// rankBudget holding the rarest words are scored; the scoring reads their
// text and runs in Go, which costs a fraction of FTS5's bm25() per row.
func (s *Store) KeywordSearch(ctx context.Context, tenant, query string, k int, types []string) ([]store.Scored, error) {
	if k <= 0 {
		return nil, nil
	}
	terms := ftsTerms(query)
	if len(terms) == 0 {
		return nil, nil
	}
	k = min(k, 1000)
	tok := tenantToken(tenant)
	var docs float64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(sum(doc), 0) FROM entity_fts_vocab WHERE term = ?`, tok).Scan(&docs); err != nil {
		return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
	}
	if docs == 0 {
		return nil, nil
	}
	// Matches per word, rarest first, and each word's idf among the
	// tenant's entities. Once the rarer words match the budget, a word
	// more common than the budget adds only low-idf ties: its matches are
	// not listed, its idf comes from the vocabulary, and it still counts in
	// the scoring below.
	vocab := map[string]float64{}
	for _, t := range terms {
		// one lookup per word: fts5vocab pushes "term = ?" down, not IN
		var n float64
		if err := s.r.QueryRowContext(ctx, `SELECT coalesce(sum(doc), 0) FROM entity_fts_vocab WHERE term = ?`, t).Scan(&n); err != nil {
			return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
		}
		vocab[t] = n
	}
	byRarity := make([]int, len(terms))
	for i := range byRarity {
		byRarity[i] = i
	}
	sort.SliceStable(byRarity, func(a, b int) bool { return vocab[terms[byRarity[a]]] < vocab[terms[byRarity[b]]] })
	budget := max(rankBudget, k)
	idf := make([]float64, len(terms))
	matched := map[int64]float64{} // rid → summed idf of its words
	for _, i := range byRarity {
		t := terms[i]
		if len(matched) >= budget && vocab[t] > float64(budget) {
			df := min(vocab[t], docs)
			idf[i] = math.Log(1 + (docs-df+0.5)/(df+0.5))
			continue
		}
		rids, err := int64s(ctx, s.r, `SELECT rowid FROM entity_fts WHERE entity_fts MATCH ?`, termMatch(tok, t))
		if err != nil {
			return nil, err
		}
		df := float64(len(rids))
		idf[i] = math.Log(1 + (docs-df+0.5)/(df+0.5))
		for _, r := range rids {
			matched[r] += idf[i]
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	order := make([]int64, 0, len(matched))
	for r := range matched {
		order = append(order, r)
	}
	sort.Slice(order, func(i, j int) bool {
		if matched[order[i]] != matched[order[j]] {
			return matched[order[i]] > matched[order[j]]
		}
		return order[i] < order[j]
	})
	// The candidates: the rarest-worded first, of the asked types, with
	// their text.
	type cand struct {
		rid  int64
		id   string
		name string
		body string
	}
	var cands []cand
	for _, part := range chunks(order, 500) {
		if len(cands) >= budget {
			break
		}
		args := []any{tenant}
		for _, r := range part {
			args = append(args, r)
		}
		q := `SELECT rid, id, name, summary, attributes, aliases FROM entities WHERE +tenant = ? AND rid IN (` + placeholders(len(part)) + `)`
		if len(types) > 0 {
			q += ` AND type IN (` + placeholders(len(types)) + `)`
			for _, t := range types {
				args = append(args, t)
			}
		}
		rows, err := s.r.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
		}
		found := map[int64]cand{}
		for rows.Next() {
			var e entityRow
			var attrs, aliases string
			if err := rows.Scan(&e.rid, &e.id, &e.name, &e.summary, &attrs, &aliases); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
			}
			_ = json.Unmarshal([]byte(attrs), &e.attributes)
			_ = json.Unmarshal([]byte(aliases), &e.aliases)
			names, body := ftsText(&e)
			found[e.rid] = cand{rid: e.rid, id: e.id, name: names, body: body}
		}
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("memory sqlite: keyword search: %w", err)
		}
		for _, r := range part {
			if c, ok := found[r]; ok && len(cands) < budget {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	index := make(map[string]int, len(terms))
	for i, t := range terms {
		index[t] = i
	}
	type scoredDoc struct {
		id    string
		score float64
	}
	lens := make([]float64, len(cands))
	tfs := make([][]float64, len(cands))
	var total float64
	for i, c := range cands {
		tf := make([]float64, len(terms))
		n := 0
		for w, col := range [2]string{c.name, c.body} {
			weight := 1.0
			if w == 0 {
				weight = nameWeight
			}
			for _, word := range words(col) {
				n++
				if j, ok := index[word]; ok {
					tf[j] += weight
				}
			}
		}
		lens[i], tfs[i] = float64(n), tf
		total += float64(n)
	}
	avg := max(total/float64(len(cands)), 1)
	out := make([]scoredDoc, len(cands))
	for i, c := range cands {
		var sc float64
		for j, tf := range tfs[i] {
			if tf == 0 {
				continue
			}
			sc += idf[j] * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*lens[i]/avg))
		}
		if sc == 0 {
			// FTS matched a form the Go tokenizer spells differently
			// (diacritics): count the words it matched once.
			sc = matched[c.rid] * 1e-3
		}
		out[i] = scoredDoc{c.id, sc}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].id < out[j].id
	})
	if len(out) > k {
		out = out[:k]
	}
	res := make([]store.Scored, len(out))
	for i, d := range out {
		res[i] = store.Scored{ID: d.id, Score: d.score}
	}
	return res, nil
}

// words cuts text as the query is cut: letters and digits, lower-cased.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
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
	rows, err := v.s.r.QueryContext(ctx, `SELECT seq, id, type, embedding FROM entities WHERE +tenant = ? AND id > ? ORDER BY id LIMIT ?`, tenant, afterID, limit)
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
