package memory

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// GetMemorySettings reads a tenant's switches and whether the conversation
// asked about (or the tenant) is captured.
func (s *Server) GetMemorySettings(ctx context.Context, req *baagentv1.GetMemorySettingsRequest) (*baagentv1.GetMemorySettingsResponse, error) {
	if err := validateGetSettings(req); err != nil {
		return nil, err
	}
	set, err := s.store.GetSettings(ctx, req.GetTenant())
	if err != nil {
		return nil, s.storeError(ctx, "GetMemorySettings", "settings", err)
	}
	return &baagentv1.GetMemorySettingsResponse{
		Settings:          settingsProto(set),
		CaptureEffective:  captured(set, req.GetConversationId()),
		PatternsEffective: patternsOn(set, req.GetConversationId()),
	}, nil
}

// UpdateMemorySettings changes the fields the request sets. Two replicas
// updating one tenant's settings at the same instant may lose one change
// (last write wins); updates through one replica are serialised.
func (s *Server) UpdateMemorySettings(ctx context.Context, req *baagentv1.UpdateMemorySettingsRequest) (*baagentv1.UpdateMemorySettingsResponse, error) {
	if err := validateUpdateSettings(req); err != nil {
		return nil, err
	}
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	tenant := req.GetTenant()
	set, err := s.store.GetSettings(ctx, tenant)
	if err != nil {
		return nil, s.storeError(ctx, "UpdateMemorySettings", "settings", err)
	}
	if req.CaptureRuns != nil {
		set.CaptureRuns = req.GetCaptureRuns()
	}
	if req.ToolsEnabled != nil {
		set.ToolsEnabled = req.GetToolsEnabled()
	}
	if req.ConversationCapture != nil {
		conv := req.GetConversationId()
		i := slices.Index(set.CaptureDisabledConversations, conv)
		switch {
		case req.GetConversationCapture() && i >= 0:
			set.CaptureDisabledConversations = slices.Delete(set.CaptureDisabledConversations, i, i+1)
		case !req.GetConversationCapture() && i < 0:
			if len(set.CaptureDisabledConversations) >= MaxDisabledConversations {
				return nil, status.Errorf(codes.ResourceExhausted,
					"capture is already off for %d conversations, the most a tenant may list; turn capture_runs off or enable some again", MaxDisabledConversations)
			}
			set.CaptureDisabledConversations = append(set.CaptureDisabledConversations, conv)
		}
	}
	if err := updatePatternSettings(&set, req); err != nil {
		return nil, err
	}
	if err := s.store.PutSettings(ctx, tenant, set); err != nil {
		return nil, s.storeError(ctx, "UpdateMemorySettings", "settings", err)
	}
	s.log.InfoContext(ctx, "memory settings updated", "tenant", tenant, "capture_runs", set.CaptureRuns,
		"tools_enabled", set.ToolsEnabled, "disabled_conversations", len(set.CaptureDisabledConversations),
		"patterns_enabled", set.PatternsEnabled, "patterns_disabled_conversations", len(set.PatternsDisabledConversations))
	return &baagentv1.UpdateMemorySettingsResponse{Settings: settingsProto(set)}, nil
}
