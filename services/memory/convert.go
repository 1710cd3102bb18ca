package memory

import (
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/memory/store"
)

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func episodeProto(ep *store.Episode) *baagentv1.Episode {
	if ep == nil {
		return nil
	}
	return &baagentv1.Episode{
		Id:             ep.ID,
		Tenant:         ep.Tenant,
		Source:         baagentv1.EpisodeSource(ep.Source),
		Content:        ep.Content,
		ConversationId: ep.ConversationID,
		RunId:          ep.RunID,
		CreatedAt:      timestamp(ep.CreatedAt),
		Status:         baagentv1.EpisodeStatus(ep.Status),
		Error:          ep.Error,
		EntityIds:      slices.Clone(ep.EntityIDs),
		Redactions:     int32(min(ep.Redactions, 1<<31-1)), //nolint:gosec // clamped
		ProcessedAt:    timestamp(ep.ProcessedAt),
	}
}

func entityProto(e *store.Entity) *baagentv1.Entity {
	if e == nil {
		return nil
	}
	return &baagentv1.Entity{
		Id:           e.ID,
		Tenant:       e.Tenant,
		Name:         e.Name,
		Type:         e.Type,
		Summary:      e.Summary,
		Attributes:   maps.Clone(e.Attributes),
		MentionCount: clamp32(e.MentionCount),
		CommunityId:  e.CommunityID,
		CreatedAt:    timestamp(e.CreatedAt),
		UpdatedAt:    timestamp(e.UpdatedAt),
		Aliases:      slices.Clone(e.Aliases),
	}
}

func relationProto(r *store.Relation) *baagentv1.Relation {
	return &baagentv1.Relation{
		Id:           r.ID,
		SourceId:     r.SourceID,
		TargetId:     r.TargetID,
		Type:         r.Type,
		Fact:         r.Fact,
		Weight:       r.Weight,
		EpisodeCount: clamp32(r.EpisodeCount),
		UpdatedAt:    timestamp(r.UpdatedAt),
	}
}

func communityProto(c *store.Community) *baagentv1.Community {
	if c == nil {
		return nil
	}
	n := c.MemberCount
	if n == 0 {
		n = len(c.MemberIDs)
	}
	return &baagentv1.Community{
		Id:          c.ID,
		Name:        c.Name,
		Summary:     c.Summary,
		MemberCount: clamp32(n),
		UpdatedAt:   timestamp(c.UpdatedAt),
	}
}

func settingsProto(s store.Settings) *baagentv1.MemorySettings {
	return &baagentv1.MemorySettings{
		CaptureRuns:                   s.CaptureRuns,
		ToolsEnabled:                  s.ToolsEnabled,
		CaptureDisabledConversations:  slices.Clone(s.CaptureDisabledConversations),
		PatternsEnabled:               s.PatternsEnabled,
		PatternsDisabledConversations: slices.Clone(s.PatternsDisabledConversations),
	}
}

func clamp32(n int) int32 {
	return int32(min(max(n, 0), 1<<31-1)) //nolint:gosec // clamped
}
