package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/baagent/baagent/services/memory/store"
)

// Edges streams the tenant's relations in id order; fn's error stops the
// walk and is returned.
func (s *Store) Edges(ctx context.Context, tenant string, fn func(r *store.Relation) error) error {
	if !validText(tenant) {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+relationCols+` FROM memory_relations WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return fmt.Errorf("memory store: edges: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRelation(rows)
		if err != nil {
			return fmt.Errorf("memory store: edges: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("memory store: edges: %w", err)
	}
	return nil
}

// ReplaceCommunities replaces the tenant's communities and memberships in
// one transaction. Members that are not the tenant's entities are ignored;
// a community's MemberCount is the members it got.
func (s *Store) ReplaceCommunities(ctx context.Context, tenant string, cs []*store.Community) error {
	if !validText(tenant) {
		return errInvalidText
	}
	for _, c := range cs {
		if c != nil && !validText(c.ID, c.Name, c.Summary) {
			return errInvalidText
		}
		if c != nil {
			c.MemberIDs = validIDs(c.MemberIDs)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The tenant row first, then entity rows, as every graph write
		// does, so that writers never wait on each other in a cycle.
		now := time.Now()
		if _, err := tx.Exec(ctx, `
INSERT INTO memory_tenants (tenant, communities_updated_at) VALUES ($1, $2)
ON CONFLICT (tenant) DO UPDATE SET communities_updated_at = EXCLUDED.communities_updated_at`, tenant, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memory_communities WHERE tenant = $1`, tenant); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memory_entities SET community_id = ''
			WHERE tenant = $1 AND community_id <> ''`, tenant); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if c == nil {
				continue
			}
			if c.ID == "" {
				c.ID = newID("co_")
			}
			if seen[c.ID] {
				return fmt.Errorf("community %q appears twice", c.ID)
			}
			seen[c.ID] = true
			tag, err := tx.Exec(ctx, `UPDATE memory_entities SET community_id = $2
				WHERE tenant = $1 AND id = ANY($3)`, tenant, c.ID, uniq(c.MemberIDs))
			if err != nil {
				return err
			}
			c.MemberCount = int(tag.RowsAffected())
			c.Tenant, c.UpdatedAt = tenant, now
			if _, err := tx.Exec(ctx, `INSERT INTO memory_communities (tenant, id, name, summary, member_count, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6)`, tenant, c.ID, c.Name, c.Summary, c.MemberCount, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("memory store: replace communities: %w", err)
	}
	return nil
}

// SetCommunitySummary writes one community's name and summary.
func (s *Store) SetCommunitySummary(ctx context.Context, tenant, id, name, summary string) error {
	if !validText(tenant, id) {
		return notFound("community", id)
	}
	if !validText(name, summary) {
		return errInvalidText
	}
	tag, err := s.pool.Exec(ctx, `UPDATE memory_communities SET name = $3, summary = $4, updated_at = clock_timestamp()
		WHERE tenant = $1 AND id = $2`, tenant, id, name, summary)
	if err != nil {
		return fmt.Errorf("memory store: set community summary: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound("community", id)
	}
	return nil
}

// GetCommunities reads communities with their members (most mentioned
// first); missing ids are left out. No ids reads all of the tenant's, the
// largest first.
func (s *Store) GetCommunities(ctx context.Context, tenant string, ids []string) ([]*store.Community, error) {
	all := len(ids) == 0
	if ids = validIDs(ids); (!all && len(ids) == 0) || !validText(tenant) {
		return nil, nil
	}
	if ids == nil {
		ids = []string{}
	}
	rows, err := s.pool.Query(ctx, `
SELECT c.tenant, c.id, c.name, c.summary, c.member_count, c.updated_at,
	coalesce((SELECT array_agg(e.id ORDER BY e.mention_count DESC, e.id) FROM memory_entities e
		WHERE e.tenant = c.tenant AND e.community_id = c.id), '{}')
FROM memory_communities c WHERE c.tenant = $1 AND ($3 OR c.id = ANY($2))
ORDER BY c.member_count DESC, c.id`, tenant, ids, all)
	if err != nil {
		return nil, fmt.Errorf("memory store: get communities: %w", err)
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Community, error) {
		var c store.Community
		err := r.Scan(&c.Tenant, &c.ID, &c.Name, &c.Summary, &c.MemberCount, &c.UpdatedAt, &c.MemberIDs)
		return &c, err
	})
	if err != nil {
		return nil, fmt.Errorf("memory store: get communities: %w", err)
	}
	if all {
		return cs, nil
	}
	byID := make(map[string]*store.Community, len(cs))
	for _, c := range cs {
		byID[c.ID] = c
	}
	out := make([]*store.Community, 0, len(cs))
	for _, id := range uniq(ids) {
		if c := byID[id]; c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// TenantsChangedSince lists the tenants whose graph changed after t.
func (s *Store) TenantsChangedSince(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT tenant FROM memory_tenants WHERE graph_changed_at > $1 ORDER BY tenant`, t)
	if err != nil {
		return nil, fmt.Errorf("memory store: tenants changed: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("memory store: tenants changed: %w", err)
	}
	return out, nil
}

// Stats counts the tenant's memory.
func (s *Store) Stats(ctx context.Context, tenant string) (store.Stats, error) {
	var (
		st  store.Stats
		cat *time.Time
	)
	if !validText(tenant) {
		return st, nil
	}
	err := s.pool.QueryRow(ctx, `
SELECT
	(SELECT count(*) FROM memory_episodes WHERE tenant = $1),
	(SELECT count(*) FROM memory_episodes WHERE tenant = $1 AND status IN (1, 2)),
	(SELECT count(*) FROM memory_episodes WHERE tenant = $1 AND status = 4),
	(SELECT count(*) FROM memory_entities WHERE tenant = $1),
	(SELECT count(*) FROM memory_relations WHERE tenant = $1),
	(SELECT count(*) FROM memory_communities WHERE tenant = $1),
	(SELECT communities_updated_at FROM memory_tenants WHERE tenant = $1)`, tenant).Scan(
		&st.Episodes, &st.EpisodesPending, &st.EpisodesFailed, &st.Entities, &st.Relations, &st.Communities, &cat)
	if err != nil {
		return store.Stats{}, fmt.Errorf("memory store: stats: %w", err)
	}
	if cat != nil {
		st.CommunitiesUpdatedAt = *cat
	}
	return st, nil
}

// GetSettings reads the tenant's switches (the defaults when never set).
func (s *Store) GetSettings(ctx context.Context, tenant string) (store.Settings, error) {
	var st store.Settings
	if !validText(tenant) {
		return store.DefaultSettings(), nil
	}
	err := s.pool.QueryRow(ctx, `SELECT capture_runs, tools_enabled, disabled_conversations,
		patterns_enabled, patterns_disabled_conversations
		FROM memory_settings WHERE tenant = $1`, tenant).Scan(&st.CaptureRuns, &st.ToolsEnabled, &st.CaptureDisabledConversations,
		&st.PatternsEnabled, &st.PatternsDisabledConversations)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.DefaultSettings(), nil
	}
	if err != nil {
		return store.Settings{}, fmt.Errorf("memory store: get settings: %w", err)
	}
	if len(st.CaptureDisabledConversations) == 0 {
		st.CaptureDisabledConversations = nil
	}
	if len(st.PatternsDisabledConversations) == 0 {
		st.PatternsDisabledConversations = nil
	}
	return st, nil
}

// PutSettings writes the tenant's switches.
func (s *Store) PutSettings(ctx context.Context, tenant string, st store.Settings) error {
	if !validText(tenant) || !validText(st.CaptureDisabledConversations...) || !validText(st.PatternsDisabledConversations...) {
		return errInvalidText
	}
	disabled := uniq(st.CaptureDisabledConversations)
	if disabled == nil {
		disabled = []string{}
	}
	patternsDisabled := uniq(st.PatternsDisabledConversations)
	if patternsDisabled == nil {
		patternsDisabled = []string{}
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO memory_settings (tenant, capture_runs, tools_enabled, disabled_conversations,
	patterns_enabled, patterns_disabled_conversations) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant) DO UPDATE SET capture_runs = EXCLUDED.capture_runs, tools_enabled = EXCLUDED.tools_enabled,
	disabled_conversations = EXCLUDED.disabled_conversations, patterns_enabled = EXCLUDED.patterns_enabled,
	patterns_disabled_conversations = EXCLUDED.patterns_disabled_conversations`,
		tenant, st.CaptureRuns, st.ToolsEnabled, disabled, st.PatternsEnabled, patternsDisabled)
	if err != nil {
		return fmt.Errorf("memory store: put settings: %w", err)
	}
	return nil
}
