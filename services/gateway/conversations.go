package gateway

import (
	"context"
	"net/http"
	"strconv"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Conversation operations (docs/concepts/conversations.md), forwarded to
// the orchestrator with the caller's tenant: another tenant's conversation
// is NotFound, as an unknown one is.

// MaxHistoryPageSize is the largest page of GetConversationMessages.
const MaxHistoryPageSize = 1000

func validateConversationID(id string) error {
	var e validate.Errors
	validate.ID(&e, "conversation_id", id)
	return e.Err()
}

func validateListConversations(req *baagentv1.GatewayServiceListConversationsRequest) error {
	var e validate.Errors
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateConversationMessages(req *baagentv1.GatewayServiceGetConversationMessagesRequest) error {
	var e validate.Errors
	validate.ID(&e, "conversation_id", req.GetConversationId())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxHistoryPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

// ListConversations lists the caller's conversations.
func (s *Server) ListConversations(ctx context.Context, req *baagentv1.GatewayServiceListConversationsRequest) (*baagentv1.GatewayServiceListConversationsResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateListConversations(req); err != nil {
		return nil, s.rejected(ctx, "ListConversations", err)
	}
	return s.listConversations(ctx, tenant, req)
}

func (s *Server) listConversations(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListConversationsRequest) (*baagentv1.GatewayServiceListConversationsResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.ListConversations(ctx, &baagentv1.ListConversationsRequest{Tenant: tenant, PageSize: req.GetPageSize(), PageToken: req.GetPageToken()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "ListConversations", err)
	}
	return &baagentv1.GatewayServiceListConversationsResponse{Conversations: resp.GetConversations(), NextPageToken: resp.GetNextPageToken()}, nil
}

// GetConversation reads one of the caller's conversations.
func (s *Server) GetConversation(ctx context.Context, req *baagentv1.GatewayServiceGetConversationRequest) (*baagentv1.GatewayServiceGetConversationResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateConversationID(req.GetConversationId()); err != nil {
		return nil, s.rejected(ctx, "GetConversation", err)
	}
	return s.getConversation(ctx, tenant, req)
}

func (s *Server) getConversation(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetConversationRequest) (*baagentv1.GatewayServiceGetConversationResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.GetConversation(ctx, &baagentv1.GetConversationRequest{Tenant: tenant, ConversationId: req.GetConversationId()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "GetConversation", err)
	}
	return &baagentv1.GatewayServiceGetConversationResponse{Conversation: resp.GetConversation()}, nil
}

// GetConversationMessages reads a page of one of the caller's
// conversations' history.
func (s *Server) GetConversationMessages(ctx context.Context, req *baagentv1.GatewayServiceGetConversationMessagesRequest) (*baagentv1.GatewayServiceGetConversationMessagesResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateConversationMessages(req); err != nil {
		return nil, s.rejected(ctx, "GetConversationMessages", err)
	}
	return s.conversationMessages(ctx, tenant, req)
}

func (s *Server) conversationMessages(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetConversationMessagesRequest) (*baagentv1.GatewayServiceGetConversationMessagesResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.GetConversationMessages(ctx, &baagentv1.GetConversationMessagesRequest{
		Tenant: tenant, ConversationId: req.GetConversationId(), PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "GetConversationMessages", err)
	}
	return &baagentv1.GatewayServiceGetConversationMessagesResponse{Messages: resp.GetMessages(), NextPageToken: resp.GetNextPageToken(), TotalCount: resp.GetTotalCount()}, nil
}

// EndConversation ends one of the caller's conversations.
func (s *Server) EndConversation(ctx context.Context, req *baagentv1.GatewayServiceEndConversationRequest) (*baagentv1.GatewayServiceEndConversationResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateConversationID(req.GetConversationId()); err != nil {
		return nil, s.rejected(ctx, "EndConversation", err)
	}
	return s.endConversation(ctx, tenant, req)
}

func (s *Server) endConversation(ctx context.Context, tenant string, req *baagentv1.GatewayServiceEndConversationRequest) (*baagentv1.GatewayServiceEndConversationResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.EndConversation(ctx, &baagentv1.EndConversationRequest{Tenant: tenant, ConversationId: req.GetConversationId()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "EndConversation", err)
	}
	return &baagentv1.GatewayServiceEndConversationResponse{Conversation: resp.GetConversation(), ArtifactsDeleted: resp.GetArtifactsDeleted(), BytesFreed: resp.GetBytesFreed()}, nil
}

// DeleteConversation deletes one of the caller's conversations and
// everything stored for it.
func (s *Server) DeleteConversation(ctx context.Context, req *baagentv1.GatewayServiceDeleteConversationRequest) (*baagentv1.GatewayServiceDeleteConversationResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateConversationID(req.GetConversationId()); err != nil {
		return nil, s.rejected(ctx, "DeleteConversation", err)
	}
	return s.deleteConversation(ctx, tenant, req)
}

func (s *Server) deleteConversation(ctx context.Context, tenant string, req *baagentv1.GatewayServiceDeleteConversationRequest) (*baagentv1.GatewayServiceDeleteConversationResponse, error) {
	if err := s.orchestratorReady(); err != nil {
		return nil, err
	}
	resp, err := s.opts.Orchestrator.DeleteConversation(ctx, &baagentv1.OrchestratorServiceDeleteConversationRequest{Tenant: tenant, ConversationId: req.GetConversationId()})
	if err != nil {
		return nil, peerError(ctx, orchestratorPeer, "DeleteConversation", err)
	}
	return &baagentv1.GatewayServiceDeleteConversationResponse{
		RunsDeleted: resp.GetRunsDeleted(), EventsDeleted: resp.GetEventsDeleted(), MessagesDeleted: resp.GetMessagesDeleted(),
		ArtifactsDeleted: resp.GetArtifactsDeleted(), BytesFreed: resp.GetBytesFreed(),
	}, nil
}

// conversationRoutes adds the HTTP routes of the conversation API.
func (s *Server) conversationRoutes(api func(string, http.HandlerFunc)) {
	api("GET /v1/conversations", s.httpListConversations)
	api("GET /v1/conversations/{conversation_id}", s.httpGetConversation)
	api("GET /v1/conversations/{conversation_id}/messages", s.httpConversationMessages)
	api("POST /v1/conversations/{conversation_id}/end", s.httpEndConversation)
	api("DELETE /v1/conversations/{conversation_id}", s.httpDeleteConversation)
}

// queryPageSize reads ?page_size=.
func queryPageSize(r *http.Request) (int32, error) {
	v := r.URL.Query().Get("page_size")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fieldError("page_size", "must be an integer")
	}
	return int32(n), nil
}

func (s *Server) httpListConversations(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceListConversationsRequest{PageToken: r.URL.Query().Get("page_token")}
	n, err := queryPageSize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	req.PageSize = n
	s.serveJSON(w, r, nil, func() error { return validateListConversations(req) }, func(c caller) (any, error) {
		return s.listConversations(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpGetConversation(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetConversationRequest{ConversationId: r.PathValue("conversation_id")}
	s.serveJSON(w, r, nil, func() error { return validateConversationID(req.GetConversationId()) }, func(c caller) (any, error) {
		return s.getConversation(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpConversationMessages(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetConversationMessagesRequest{ConversationId: r.PathValue("conversation_id"), PageToken: r.URL.Query().Get("page_token")}
	n, err := queryPageSize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	req.PageSize = n
	s.serveJSON(w, r, nil, func() error { return validateConversationMessages(req) }, func(c caller) (any, error) {
		return s.conversationMessages(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpEndConversation(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceEndConversationRequest{ConversationId: r.PathValue("conversation_id")}
	s.serveJSON(w, r, nil, func() error { return validateConversationID(req.GetConversationId()) }, func(c caller) (any, error) {
		return s.endConversation(r.Context(), c.tenant, req)
	})
}

func (s *Server) httpDeleteConversation(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceDeleteConversationRequest{ConversationId: r.PathValue("conversation_id")}
	s.serveJSON(w, r, nil, func() error { return validateConversationID(req.GetConversationId()) }, func(c caller) (any, error) {
		return s.deleteConversation(r.Context(), c.tenant, req)
	})
}
