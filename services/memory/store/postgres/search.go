package postgres

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/services/memory/store"
)

// maxQueryTerms bounds the words of one keyword query.
const maxQueryTerms = 32

// maxTermLen bounds one word, in bytes (PostgreSQL refuses words of 2 KiB).
const maxTermLen = 200

// keywordTerms turns user text into websearch_to_tsquery terms. A term is
// a run of letters and digits, or several joined by hyphens, which is a
// phrase of its words ("ORD-1002": "ord 1002", as the entities' text is
// indexed with hyphens read as spaces); every other character separates
// terms. Each term is quoted, so no input
// — quotes, minus signs, operators — adds syntax of its own; the text still
// travels as a bound parameter, never spliced into SQL.
func keywordTerms(text string) []string {
	seen := map[string]bool{}
	var terms []string
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	for _, chunk := range strings.FieldsFunc(text, func(r rune) bool { return !isWord(r) && r != '-' }) {
		words := strings.FieldsFunc(chunk, func(r rune) bool { return !isWord(r) })
		if len(words) == 0 || len(words) > maxQueryTerms {
			continue
		}
		for i, w := range words {
			if len(w) > maxTermLen {
				w = w[:maxTermLen]
				for !utf8.ValidString(w) {
					w = w[:len(w)-1]
				}
			}
			words[i] = strings.ToLower(w)
		}
		term := `"` + strings.Join(words, " ") + `"`
		if seen[term] {
			continue
		}
		seen[term] = true
		terms = append(terms, term)
		if len(terms) == maxQueryTerms {
			break
		}
	}
	return terms
}

// keywordQuery is the query matching any of the text's terms (joined by
// " or "); empty when the text has no word.
func keywordQuery(text string) string {
	return strings.Join(keywordTerms(text), " or ")
}

// maxK bounds a search's result count.
const maxK = 1000

// keywordCandidates bounds the rows one keyword search ranks: a query whose
// words are common would otherwise rank a large part of the tenant.
const keywordCandidates = 2000

// keywordSQL ranks the tenant's entities matching $2 (websearch syntax) in
// both the unstemmed and the English-stemmed forms, among at most $5
// candidates.
const keywordSQL = `
WITH q AS (SELECT websearch_to_tsquery('memory_simple', $2) || websearch_to_tsquery('english', $2) AS q),
c AS (
	SELECT e.id, e.tsv FROM memory_entities e, q
	WHERE e.tenant = $1 AND e.tsv @@ q.q AND (cardinality($4::text[]) = 0 OR e.type = ANY($4))
	LIMIT $5
)
SELECT c.id, ts_rank(c.tsv, q.q)::float8 AS score
FROM c, q
ORDER BY score DESC, c.id
LIMIT $3`

// KeywordSearch is full-text search over names and aliases (weight A) and
// summaries and attributes (weight B), ranked by ts_rank; an entity
// matching any word is found. A query of several words first asks for the
// entities matching all of them, which is selective and ranks them first;
// only when those are fewer than k does it rank the entities matching any
// word (at most keywordCandidates of them).
func (s *Store) KeywordSearch(ctx context.Context, tenant, query string, k int, types []string) ([]store.Scored, error) {
	terms := keywordTerms(query)
	types = typesArg(types)
	if len(terms) == 0 || k <= 0 || !validText(tenant) || !validText(types...) {
		return nil, nil
	}
	k = min(k, maxK)
	var all []store.Scored
	if len(terms) > 1 {
		var err error
		if all, err = s.keywordRun(ctx, tenant, strings.Join(terms, " "), k, types); err != nil {
			return nil, err
		}
		if len(all) >= k {
			return all, nil
		}
	}
	anyHits, err := s.keywordRun(ctx, tenant, strings.Join(terms, " or "), k, types)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return anyHits, nil
	}
	// The all-words hits first, then the others, scores kept descending.
	out := all
	have := make(map[string]bool, len(all))
	for _, h := range all {
		have[h.ID] = true
	}
	floor := all[len(all)-1].Score
	for _, h := range anyHits {
		if len(out) == k {
			break
		}
		if !have[h.ID] {
			h.Score = min(h.Score, floor)
			out = append(out, h)
		}
	}
	return out, nil
}

func (s *Store) keywordRun(ctx context.Context, tenant, q string, k int, types []string) ([]store.Scored, error) {
	rows, err := s.pool.Query(ctx, keywordSQL, tenant, q, k, types, keywordCandidates)
	if err != nil {
		return nil, fmt.Errorf("memory store: keyword search: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Scored, error) {
		var sc store.Scored
		err := r.Scan(&sc.ID, &sc.Score)
		return sc, err
	})
	if err != nil {
		return nil, fmt.Errorf("memory store: keyword search: %w", err)
	}
	return out, nil
}

// maxDepth bounds traversal: the walk's rows grow with degree^depth.
const maxDepth = 4

// traverseFanOut is how many of an entity's strongest edges, per
// direction, a walk follows: hubs with thousands of edges would otherwise
// multiply the rows of every further hop.
const traverseFanOut = 32

// traverseSQL walks RELATES_TO edges both ways from the seeds, following
// each entity's $5 strongest edges per direction and multiplying edge
// weights, and keeps each entity's best path (highest weight, then fewest
// hops).
const traverseSQL = `
WITH RECURSIVE walk(id, hops, weight) AS (
	SELECT s, 0, 1.0::float8 FROM unnest($2::text[]) AS s
	UNION ALL
	SELECT n.other, w.hops + 1, w.weight * n.weight
	FROM walk w
	CROSS JOIN LATERAL (
		(SELECT r.target_id AS other, r.weight FROM memory_relations r
			WHERE r.tenant = $1 AND r.source_id = w.id ORDER BY r.weight DESC LIMIT $5)
		UNION ALL
		(SELECT r.source_id, r.weight FROM memory_relations r
			WHERE r.tenant = $1 AND r.target_id = w.id ORDER BY r.weight DESC LIMIT $5)
	) n
	WHERE w.hops < $3
), best AS (
	SELECT DISTINCT ON (id) id, hops, weight FROM walk
	WHERE hops > 0 AND NOT id = ANY($2)
	ORDER BY id, weight DESC, hops
)
SELECT id, hops, weight FROM best ORDER BY weight DESC, hops, id LIMIT $4`

// Traverse returns the entities within depth hops of the seeds, best path
// weight first.
func (s *Store) Traverse(ctx context.Context, tenant string, seeds []string, depth, limit int) ([]store.GraphHit, error) {
	seeds = validIDs(seeds)
	if len(seeds) == 0 || depth <= 0 || limit <= 0 || !validText(tenant) {
		return nil, nil
	}
	depth = min(depth, maxDepth)
	rows, err := s.pool.Query(ctx, traverseSQL, tenant, uniq(seeds), depth, min(limit, maxK), traverseFanOut)
	if err != nil {
		return nil, fmt.Errorf("memory store: traverse: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.GraphHit, error) {
		var h store.GraphHit
		err := r.Scan(&h.ID, &h.Hops, &h.Weight)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("memory store: traverse: %w", err)
	}
	return out, nil
}

// Neighbourhood is the subgraph around centre, walked breadth first with
// each hop's strongest edges first, up to maxNodes entities; the relations
// among them and their communities.
func (s *Store) Neighbourhood(ctx context.Context, tenant, centre string, depth, maxNodes int) (*store.Graph, error) {
	c, err := s.GetEntity(ctx, tenant, centre)
	if err != nil {
		return nil, err
	}
	maxNodes = min(max(maxNodes, 1), maxK)
	depth = min(depth, maxDepth)
	g := &store.Graph{Entities: []*store.Entity{c}}
	seen := map[string]bool{centre: true}
	ids := []string{centre}
	frontier := []string{centre}
	for hop := 1; hop <= depth && len(frontier) > 0 && !g.Truncated; hop++ {
		next, truncated, err := s.expand(ctx, tenant, frontier, seen, maxNodes-len(ids))
		if err != nil {
			return nil, err
		}
		ids = append(ids, next...)
		frontier, g.Truncated = next, truncated
	}
	if len(ids) > 1 {
		es, err := s.GetEntities(ctx, tenant, ids[1:])
		if err != nil {
			return nil, err
		}
		g.Entities = append(g.Entities, es...)
	}
	var comms []string
	for _, e := range g.Entities {
		if e.CommunityID != "" {
			comms = append(comms, e.CommunityID)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+relationCols+` FROM memory_relations
WHERE tenant = $1 AND source_id = ANY($2) AND target_id = ANY($2)
ORDER BY weight DESC, id`, tenant, ids)
	if err != nil {
		return nil, fmt.Errorf("memory store: neighbourhood: %w", err)
	}
	if g.Relations, err = collectRelations(rows); err != nil {
		return nil, fmt.Errorf("memory store: neighbourhood: %w", err)
	}
	if len(comms) > 0 {
		if g.Communities, err = s.GetCommunities(ctx, tenant, uniq(comms)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// expand is one breadth-first hop: the unseen entities next to frontier,
// strongest edge first, at most room of them (marked seen), and whether an
// unseen one was left out.
func (s *Store) expand(ctx context.Context, tenant string, frontier []string, seen map[string]bool, room int) ([]string, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT source_id, target_id FROM memory_relations
WHERE tenant = $1 AND (source_id = ANY($2) OR target_id = ANY($2))
ORDER BY weight DESC, id`, tenant, frontier)
	if err != nil {
		return nil, false, fmt.Errorf("memory store: neighbourhood: %w", err)
	}
	defer rows.Close()
	var next []string
	for rows.Next() {
		var src, dst string
		if err := rows.Scan(&src, &dst); err != nil {
			return nil, false, fmt.Errorf("memory store: neighbourhood: %w", err)
		}
		for _, id := range []string{src, dst} {
			if seen[id] {
				continue
			}
			if len(next) >= room {
				return next, true, nil
			}
			seen[id] = true
			next = append(next, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("memory store: neighbourhood: %w", err)
	}
	return next, false, nil
}

// VectorSearch is the k entities nearest to vec by cosine similarity.
func (s *Store) VectorSearch(ctx context.Context, tenant string, vec []float32, k int, types []string) ([]store.Scored, error) {
	if len(vec) == 0 || k <= 0 || !validText(tenant) {
		return nil, nil
	}
	k = min(k, maxK)
	types = typesArg(types)
	if !validText(types...) {
		return nil, nil
	}
	if s.pgvector {
		return s.pgvectorSearch(ctx, tenant, vec, k, types)
	}
	hits, err := s.vectors.Search(ctx, tenant, vec, k, types)
	if err != nil {
		return nil, fmt.Errorf("memory store: vector search: %w", err)
	}
	out := make([]store.Scored, len(hits))
	for i, h := range hits {
		out[i] = store.Scored{ID: h.ID, Score: h.Score}
	}
	return out, nil
}
