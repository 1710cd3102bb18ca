package memory

import (
	"context"
	"slices"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/store"
)

// GetEntity reads one entity with its relations, community and newest
// episodes.
func (s *Server) GetEntity(ctx context.Context, req *baagentv1.GetEntityRequest) (*baagentv1.GetEntityResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), entityPrefix); err != nil {
		return nil, err
	}
	tenant := req.GetTenant()
	e, err := s.store.GetEntity(ctx, tenant, req.GetId())
	if err != nil {
		return nil, s.storeError(ctx, "GetEntity", "entity", err)
	}
	rels, err := s.store.Relations(ctx, tenant, []string{e.ID}, DefaultEntityRelations)
	if err != nil {
		return nil, s.storeError(ctx, "GetEntity", "relations", err)
	}
	names, err := s.relatedNames(ctx, tenant, rels)
	if err != nil {
		return nil, s.storeError(ctx, "GetEntity", "related entities", err)
	}
	eps, err := s.store.EntityEpisodes(ctx, tenant, e.ID, DefaultEntityEpisodes)
	if err != nil {
		return nil, s.storeError(ctx, "GetEntity", "episodes", err)
	}
	resp := &baagentv1.GetEntityResponse{Entity: entityProto(e), RelatedNames: names}
	for _, r := range rels {
		resp.Relations = append(resp.Relations, relationProto(r))
	}
	for _, ep := range eps {
		resp.Episodes = append(resp.Episodes, episodeProto(ep))
	}
	if e.CommunityID != "" {
		cs, err := s.store.GetCommunities(ctx, tenant, []string{e.CommunityID})
		if err != nil {
			return nil, s.storeError(ctx, "GetEntity", "community", err)
		}
		if len(cs) > 0 {
			resp.Community = communityProto(cs[0])
		}
	}
	return resp, nil
}

// relatedNames reads the names of the entities at the ends of rels.
func (s *Server) relatedNames(ctx context.Context, tenant string, rels []*store.Relation) (map[string]string, error) {
	if len(rels) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, 2*len(rels))
	for _, r := range rels {
		ids = append(ids, r.SourceID, r.TargetID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ents, err := s.store.GetEntities(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ents))
	for _, e := range ents {
		names[e.ID] = e.Name
	}
	return names, nil
}

// ListEntities lists a tenant's entities by name.
func (s *Server) ListEntities(ctx context.Context, req *baagentv1.ListEntitiesRequest) (*baagentv1.ListEntitiesResponse, error) {
	if err := validateListEntities(req); err != nil {
		return nil, err
	}
	ents, next, err := s.store.ListEntities(ctx, req.GetTenant(),
		store.EntityFilter{Type: req.GetType(), NamePrefix: req.GetNamePrefix()},
		store.Page{Size: pageSize(req.GetPageSize()), Token: req.GetPageToken()})
	if err != nil {
		return nil, s.pageError(ctx, "ListEntities", req.GetPageToken(), err, func() error {
			_, _, err := s.store.ListEntities(ctx, req.GetTenant(), store.EntityFilter{}, store.Page{Size: 1})
			return err
		})
	}
	resp := &baagentv1.ListEntitiesResponse{NextPageToken: next}
	for _, e := range ents {
		resp.Entities = append(resp.Entities, entityProto(e))
	}
	return resp, nil
}

// DeleteEntity removes an entity with its relations, mentions and
// community membership.
func (s *Server) DeleteEntity(ctx context.Context, req *baagentv1.DeleteEntityRequest) (*baagentv1.DeleteEntityResponse, error) {
	if err := validateTenantAndID(req.GetTenant(), "id", req.GetId(), entityPrefix); err != nil {
		return nil, err
	}
	out, err := s.store.DeleteEntity(ctx, req.GetTenant(), req.GetId())
	if err != nil {
		return nil, s.storeError(ctx, "DeleteEntity", "entity", err)
	}
	s.log.InfoContext(ctx, "entity deleted", "tenant", req.GetTenant(), "entity", req.GetId(), "relations_removed", out.Relations)
	return &baagentv1.DeleteEntityResponse{RelationsRemoved: clamp32(out.Relations)}, nil
}

// GetGraph reads the bounded neighbourhood of an entity.
func (s *Server) GetGraph(ctx context.Context, req *baagentv1.GetGraphRequest) (*baagentv1.GetGraphResponse, error) {
	if err := validateGetGraph(req); err != nil {
		return nil, err
	}
	depth, maxNodes := int(req.GetDepth()), int(req.GetMaxNodes())
	if depth == 0 {
		depth = 1
	}
	if maxNodes == 0 {
		maxNodes = DefaultGraphNodes
	}
	g, err := s.store.Neighbourhood(ctx, req.GetTenant(), req.GetEntityId(), depth, maxNodes)
	if err != nil {
		return nil, s.storeError(ctx, "GetGraph", "entity", err)
	}
	resp := &baagentv1.GetGraphResponse{Truncated: g.Truncated}
	for _, e := range g.Entities {
		resp.Entities = append(resp.Entities, entityProto(e))
	}
	for _, r := range g.Relations {
		resp.Relations = append(resp.Relations, relationProto(r))
	}
	for _, c := range g.Communities {
		resp.Communities = append(resp.Communities, communityProto(c))
	}
	return resp, nil
}

// Stats counts a tenant's memory.
func (s *Server) Stats(ctx context.Context, req *baagentv1.StatsRequest) (*baagentv1.StatsResponse, error) {
	if err := validateTenant(req.GetTenant()); err != nil {
		return nil, err
	}
	st, err := s.store.Stats(ctx, req.GetTenant())
	if err != nil {
		return nil, s.storeError(ctx, "Stats", "tenant", err)
	}
	return &baagentv1.StatsResponse{
		Episodes:             st.Episodes,
		EpisodesPending:      st.EpisodesPending,
		EpisodesFailed:       st.EpisodesFailed,
		Entities:             st.Entities,
		Relations:            st.Relations,
		Communities:          st.Communities,
		Backend:              s.store.Backend(),
		EmbeddingModel:       s.embed.Model(),
		CommunitiesUpdatedAt: timestamp(st.CommunitiesUpdatedAt),
	}, nil
}
