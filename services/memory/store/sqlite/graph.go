package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// maxDepth bounds traversal and neighbourhood depth.
const maxDepth = 6

// edge is a RELATES_TO edge seen from one end.
type edge struct {
	from, to int64
	weight   float64
}

// edgesOf reads the edges touching the given entities, either direction,
// each reported from the given end.
func (s *Store) edgesOf(ctx context.Context, tenant string, rids []int64) ([]edge, error) {
	var out []edge
	for _, part := range chunks(rids, 400) {
		args := make([]any, 0, 2*len(part)+2)
		for _, r := range part {
			args = append(args, r)
		}
		args = append(args, tenant)
		for _, r := range part {
			args = append(args, r)
		}
		args = append(args, tenant)
		ph := placeholders(len(part))
		rows, err := s.r.QueryContext(ctx, `SELECT source_rid, target_rid, weight FROM relations WHERE source_rid IN (`+ph+`) AND +tenant = ?
			UNION ALL SELECT target_rid, source_rid, weight FROM relations WHERE target_rid IN (`+ph+`) AND +tenant = ?`, args...)
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: edges: %w", err)
		}
		for rows.Next() {
			var e edge
			if err := rows.Scan(&e.from, &e.to, &e.weight); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("memory sqlite: edges: %w", err)
			}
			out = append(out, e)
		}
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("memory sqlite: edges: %w", err)
		}
	}
	return out, nil
}

// ridsOf resolves the tenant's entity ids to rids (unknown ones left out).
func (s *Store) ridsOf(ctx context.Context, tenant string, ids []string) (map[int64]string, error) {
	out := map[int64]string{}
	for _, part := range chunks(ids, 500) {
		args := []any{tenant}
		for _, id := range part {
			args = append(args, id)
		}
		if err := s.pairs(ctx, out, `SELECT rid, id FROM entities WHERE +tenant = ? AND id IN (`+placeholders(len(part))+`)`, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// idsOf resolves rids to ids.
func (s *Store) idsOf(ctx context.Context, tenant string, rids []int64) (map[int64]string, error) {
	out := map[int64]string{}
	for _, part := range chunks(rids, 500) {
		args := []any{tenant}
		for _, r := range part {
			args = append(args, r)
		}
		if err := s.pairs(ctx, out, `SELECT rid, id FROM entities WHERE +tenant = ? AND rid IN (`+placeholders(len(part))+`)`, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) pairs(ctx context.Context, into map[int64]string, q string, args ...any) error {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("memory sqlite: entities: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var rid int64
		var id string
		if err := rows.Scan(&rid, &id); err != nil {
			return fmt.Errorf("memory sqlite: entities: %w", err)
		}
		into[rid] = id
	}
	return rows.Err()
}

type reach struct {
	hops   int
	weight float64
}

// Traverse walks RELATES_TO edges from the seeds, level by level, keeping
// for each entity the best path weight (and the fewest hops on ties).
func (s *Store) Traverse(ctx context.Context, tenant string, seeds []string, depth, limit int) ([]store.GraphHit, error) {
	if depth <= 0 || limit <= 0 || len(seeds) == 0 {
		return nil, nil
	}
	depth, limit = min(depth, maxDepth), min(limit, 1000)
	seedRids, err := s.ridsOf(ctx, tenant, seeds)
	if err != nil {
		return nil, err
	}
	best := map[int64]reach{}
	frontier := map[int64]float64{}
	for r := range seedRids {
		frontier[r] = 1
	}
	for hop := 1; hop <= depth && len(frontier) > 0; hop++ {
		from := make([]int64, 0, len(frontier))
		for r := range frontier {
			from = append(from, r)
		}
		edges, err := s.edgesOf(ctx, tenant, from)
		if err != nil {
			return nil, err
		}
		next := map[int64]float64{}
		for _, e := range edges {
			if _, seed := seedRids[e.to]; seed {
				continue
			}
			w := frontier[e.from] * e.weight
			if b, ok := best[e.to]; ok && b.weight >= w {
				continue
			}
			if w > next[e.to] {
				next[e.to] = w
			}
		}
		for r, w := range next {
			best[r] = reach{hops: hop, weight: w}
		}
		frontier = next
	}
	if len(best) == 0 {
		return nil, nil
	}
	rids := make([]int64, 0, len(best))
	for r := range best {
		rids = append(rids, r)
	}
	ids, err := s.idsOf(ctx, tenant, rids)
	if err != nil {
		return nil, err
	}
	out := make([]store.GraphHit, 0, len(best))
	for r, b := range best {
		if id, ok := ids[r]; ok {
			out = append(out, store.GraphHit{ID: id, Hops: b.hops, Weight: b.weight})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Weight != b.Weight {
			return a.Weight > b.Weight
		}
		if a.Hops != b.Hops {
			return a.Hops < b.Hops
		}
		return a.ID < b.ID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Neighbourhood is the subgraph around centre: breadth first, strongest
// edges first, at most maxNodes entities.
func (s *Store) Neighbourhood(ctx context.Context, tenant, centre string, depth, maxNodes int) (*store.Graph, error) {
	depth, maxNodes = max(0, min(depth, maxDepth)), max(1, min(maxNodes, 2000))
	cr, err := s.ridsOf(ctx, tenant, []string{centre})
	if err != nil {
		return nil, err
	}
	if len(cr) == 0 {
		return nil, notFound("entity", centre)
	}
	var centreRid int64
	for r := range cr {
		centreRid = r
	}
	order := []int64{centreRid}
	in := map[int64]bool{centreRid: true}
	g := &store.Graph{}
	frontier := []int64{centreRid}
	for hop := 1; hop <= depth && len(frontier) > 0; hop++ {
		edges, err := s.edgesOf(ctx, tenant, frontier)
		if err != nil {
			return nil, err
		}
		bestW := map[int64]float64{}
		for _, e := range edges {
			if in[e.to] {
				continue
			}
			if w, ok := bestW[e.to]; !ok || e.weight > w {
				bestW[e.to] = e.weight
			}
		}
		cand := make([]int64, 0, len(bestW))
		for r := range bestW {
			cand = append(cand, r)
		}
		sort.Slice(cand, func(i, j int) bool {
			if bestW[cand[i]] != bestW[cand[j]] {
				return bestW[cand[i]] > bestW[cand[j]]
			}
			return cand[i] < cand[j]
		})
		frontier = frontier[:0:0]
		for _, r := range cand {
			if len(order) >= maxNodes {
				g.Truncated = true
				break
			}
			in[r] = true
			order = append(order, r)
			frontier = append(frontier, r)
		}
		if g.Truncated {
			break
		}
	}
	// Entities in order.
	byRid := map[int64]*store.Entity{}
	for _, part := range chunks(order, 500) {
		args := []any{tenant}
		for _, r := range part {
			args = append(args, r)
		}
		es, rids, err := s.queryEntities(ctx, `SELECT `+entityCols+` FROM entities WHERE +tenant = ? AND rid IN (`+placeholders(len(part))+`)`, args...)
		if err != nil {
			return nil, err
		}
		for i, e := range es {
			byRid[rids[i]] = e
		}
	}
	communities := map[string]bool{}
	var cids []string
	for _, r := range order {
		if e := byRid[r]; e != nil {
			g.Entities = append(g.Entities, e)
			if e.CommunityID != "" && !communities[e.CommunityID] {
				communities[e.CommunityID] = true
				cids = append(cids, e.CommunityID)
			}
		}
	}
	// Relations among them.
	for _, part := range chunks(order, 400) {
		args := []any{tenant}
		for _, r := range part {
			args = append(args, r)
		}
		rows, err := s.r.QueryContext(ctx, `SELECT target_rid, `+relationCols+` FROM relations WHERE +tenant = ? AND source_rid IN (`+placeholders(len(part))+`) ORDER BY weight DESC, id`, args...)
		if err != nil {
			return nil, fmt.Errorf("memory sqlite: relations: %w", err)
		}
		for rows.Next() {
			var tgt int64
			var r store.Relation
			var rid, updated int64
			if err := rows.Scan(&tgt, &rid, &r.Tenant, &r.ID, &r.SourceID, &r.TargetID, &r.Type, &r.Fact, &r.Weight, &r.EpisodeCount, &updated); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("memory sqlite: relations: %w", err)
			}
			if in[tgt] {
				r.UpdatedAt = fromNanos(updated)
				g.Relations = append(g.Relations, &r)
			}
		}
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("memory sqlite: relations: %w", err)
		}
	}
	if len(cids) > 0 {
		if g.Communities, err = s.GetCommunities(ctx, tenant, cids); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Edges streams every RELATES_TO edge of the tenant.
func (s *Store) Edges(ctx context.Context, tenant string, fn func(r *store.Relation) error) error {
	// Paged by rid so that no read transaction stays open while fn runs.
	after := int64(0)
	for {
		rows, err := s.r.QueryContext(ctx, `SELECT `+relationCols+` FROM relations WHERE tenant = ? AND rid > ? ORDER BY rid LIMIT 1000`, tenant, after)
		if err != nil {
			return fmt.Errorf("memory sqlite: edges: %w", err)
		}
		var page []*store.Relation
		for rows.Next() {
			r, rid, err := scanRelation(rows)
			if err != nil {
				_ = rows.Close()
				return fmt.Errorf("memory sqlite: edges: %w", err)
			}
			page = append(page, r)
			after = rid
		}
		_ = rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("memory sqlite: edges: %w", err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < 1000 {
			return nil
		}
	}
}

// --- communities -----------------------------------------------------------

// ReplaceCommunities replaces the tenant's communities and memberships.
func (s *Store) ReplaceCommunities(ctx context.Context, tenant string, cs []*store.Community) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.o.Now().UnixNano()
		for _, q := range []string{
			`UPDATE entities SET community_id = '' WHERE tenant = ? AND community_id <> ''`,
			`DELETE FROM communities WHERE tenant = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, tenant); err != nil {
				return fmt.Errorf("memory sqlite: communities: %w", err)
			}
		}
		for _, c := range cs {
			if c == nil || c.ID == "" {
				return errors.New("memory sqlite: a community needs an id")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO communities (tenant, id, name, summary, updated_at) VALUES (?, ?, ?, ?, ?)`,
				tenant, c.ID, c.Name, c.Summary, now); err != nil {
				return fmt.Errorf("memory sqlite: community %s: %w", c.ID, err)
			}
			for _, part := range chunks(c.MemberIDs, 500) {
				args := []any{c.ID, tenant}
				for _, id := range part {
					args = append(args, id)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE entities SET community_id = ? WHERE tenant = ? AND id IN (`+placeholders(len(part))+`)`, args...); err != nil {
					return fmt.Errorf("memory sqlite: community members: %w", err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (tenant, communities_updated_at) VALUES (?, ?)
			ON CONFLICT (tenant) DO UPDATE SET communities_updated_at = excluded.communities_updated_at`, tenant, now); err != nil {
			return fmt.Errorf("memory sqlite: communities: %w", err)
		}
		return nil
	})
}

// SetCommunitySummary writes one community's name and summary.
func (s *Store) SetCommunitySummary(ctx context.Context, tenant, id, name, summary string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.o.Now().UnixNano()
		res, err := tx.ExecContext(ctx, `UPDATE communities SET name = ?, summary = ?, updated_at = ? WHERE tenant = ? AND id = ?`, name, summary, now, tenant, id)
		if err != nil {
			return fmt.Errorf("memory sqlite: community: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("community", id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tenants SET communities_updated_at = ? WHERE tenant = ?`, now, tenant); err != nil {
			return fmt.Errorf("memory sqlite: community: %w", err)
		}
		return nil
	})
}

// GetCommunities reads communities with their members; no ids means all.
func (s *Store) GetCommunities(ctx context.Context, tenant string, ids []string) ([]*store.Community, error) {
	q := `SELECT id, name, summary, updated_at FROM communities WHERE tenant = ?`
	args := []any{tenant}
	if len(ids) > 0 {
		if len(ids) > 500 {
			ids = ids[:500]
		}
		q += ` AND id IN (` + placeholders(len(ids)) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	q += ` ORDER BY id`
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: communities: %w", err)
	}
	var out []*store.Community
	byID := map[string]*store.Community{}
	for rows.Next() {
		c := &store.Community{Tenant: tenant}
		var updated int64
		if err := rows.Scan(&c.ID, &c.Name, &c.Summary, &updated); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("memory sqlite: communities: %w", err)
		}
		c.UpdatedAt = fromNanos(updated)
		out = append(out, c)
		byID[c.ID] = c
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory sqlite: communities: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	mq := `SELECT community_id, id FROM entities WHERE tenant = ? AND community_id <> ''`
	margs := []any{tenant}
	if len(ids) > 0 {
		mq += ` AND community_id IN (` + placeholders(len(ids)) + `)`
		margs = append(margs, args[1:]...)
	}
	mrows, err := s.r.QueryContext(ctx, mq+` ORDER BY id`, margs...)
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: community members: %w", err)
	}
	defer func() { _ = mrows.Close() }()
	for mrows.Next() {
		var cid, eid string
		if err := mrows.Scan(&cid, &eid); err != nil {
			return nil, fmt.Errorf("memory sqlite: community members: %w", err)
		}
		if c := byID[cid]; c != nil {
			c.MemberIDs = append(c.MemberIDs, eid)
			c.MemberCount++
		}
	}
	return out, mrows.Err()
}

// TenantsChangedSince lists tenants whose graph changed after t.
func (s *Store) TenantsChangedSince(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant FROM tenants WHERE graph_changed_at > ? ORDER BY tenant`, t.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("memory sqlite: tenants: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("memory sqlite: tenants: %w", err)
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// Stats counts a tenant's memory.
func (s *Store) Stats(ctx context.Context, tenant string) (store.Stats, error) {
	var st store.Stats
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM episodes WHERE tenant = ? GROUP BY status`, tenant)
	if err != nil {
		return st, fmt.Errorf("memory sqlite: stats: %w", err)
	}
	for rows.Next() {
		var status int32
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			_ = rows.Close()
			return st, fmt.Errorf("memory sqlite: stats: %w", err)
		}
		st.Episodes += n
		switch store.EpisodeStatus(status) {
		case store.StatusPending, store.StatusProcessing:
			st.EpisodesPending += n
		case store.StatusFailed:
			st.EpisodesFailed += n
		}
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("memory sqlite: stats: %w", err)
	}
	var cu int64
	err = s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM entities WHERE tenant = ?1),
		(SELECT count(*) FROM relations WHERE tenant = ?1),
		(SELECT count(*) FROM communities WHERE tenant = ?1),
		coalesce((SELECT communities_updated_at FROM tenants WHERE tenant = ?1), 0)`, tenant).
		Scan(&st.Entities, &st.Relations, &st.Communities, &cu)
	if err != nil {
		return st, fmt.Errorf("memory sqlite: stats: %w", err)
	}
	st.CommunitiesUpdatedAt = fromNanos(cu)
	return st, nil
}

// --- settings --------------------------------------------------------------

type settingsJSON struct {
	CaptureRuns                  bool     `json:"capture_runs"`
	ToolsEnabled                 bool     `json:"tools_enabled"`
	CaptureDisabledConversations []string `json:"capture_disabled_conversations,omitempty"`
	// PatternsEnabled is a pointer so that a row written before the field
	// existed reads as the default, true.
	PatternsEnabled               *bool    `json:"patterns_enabled,omitempty"`
	PatternsDisabledConversations []string `json:"patterns_disabled_conversations,omitempty"`
}

func (j settingsJSON) settings() store.Settings {
	return store.Settings{
		CaptureRuns:                   j.CaptureRuns,
		ToolsEnabled:                  j.ToolsEnabled,
		CaptureDisabledConversations:  j.CaptureDisabledConversations,
		PatternsEnabled:               j.PatternsEnabled == nil || *j.PatternsEnabled,
		PatternsDisabledConversations: j.PatternsDisabledConversations,
	}
}

func settingsJSONOf(st store.Settings) settingsJSON {
	return settingsJSON{
		CaptureRuns:                   st.CaptureRuns,
		ToolsEnabled:                  st.ToolsEnabled,
		CaptureDisabledConversations:  st.CaptureDisabledConversations,
		PatternsEnabled:               &st.PatternsEnabled,
		PatternsDisabledConversations: st.PatternsDisabledConversations,
	}
}

// GetSettings reads a tenant's switches (the defaults when never set).
func (s *Store) GetSettings(ctx context.Context, tenant string) (store.Settings, error) {
	var raw sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT settings FROM tenants WHERE tenant = ?`, tenant).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !raw.Valid) {
		return store.DefaultSettings(), nil
	}
	if err != nil {
		return store.Settings{}, fmt.Errorf("memory sqlite: settings: %w", err)
	}
	var j settingsJSON
	if err := json.Unmarshal([]byte(raw.String), &j); err != nil {
		return store.Settings{}, fmt.Errorf("memory sqlite: settings: %w", err)
	}
	return j.settings(), nil
}

// PutSettings writes a tenant's switches.
func (s *Store) PutSettings(ctx context.Context, tenant string, st store.Settings) error {
	b, err := json.Marshal(settingsJSONOf(st))
	if err != nil {
		return fmt.Errorf("memory sqlite: settings: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (tenant, settings) VALUES (?, ?)
			ON CONFLICT (tenant) DO UPDATE SET settings = excluded.settings`, tenant, string(b)); err != nil {
			return fmt.Errorf("memory sqlite: settings: %w", err)
		}
		return nil
	})
}
