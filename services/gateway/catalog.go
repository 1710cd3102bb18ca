package gateway

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Read-only pass-throughs to the skills, toolrunner and tokens services,
// scoped to the caller's tenant, and the direct tool invocation for
// debugging tools.

// callerGateway is the caller id of tools invoked through the gateway
// outside a run (the toolrunner requires one; it is part of the
// idempotency key).
const callerGateway = "gateway"

// scratchConversation is the workspace of a direct tool call that names
// no conversation.
const scratchConversation = "scratch"

// ListSkills lists the caller's skills.
func (s *Server) ListSkills(ctx context.Context, req *baagentv1.GatewayServiceListSkillsRequest) (*baagentv1.GatewayServiceListSkillsResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateListSkills(req); err != nil {
		return nil, s.rejected(ctx, "ListSkills", err)
	}
	return s.listSkills(ctx, tenant, req)
}

func (s *Server) listSkills(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListSkillsRequest) (*baagentv1.GatewayServiceListSkillsResponse, error) {
	if err := s.peerReady(s.opts.Skills == nil, "skills"); err != nil {
		return nil, err
	}
	resp, err := s.opts.Skills.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: tenant, Project: req.GetProject(), IncludeInvalid: req.GetIncludeInvalid(), Scope: req.GetScope()})
	if err != nil {
		return nil, peerError(ctx, "skills", "ListSkills", err)
	}
	return &baagentv1.GatewayServiceListSkillsResponse{Skills: resp.GetSkills(), Invalid: resp.GetInvalid()}, nil
}

// GetSkill reads one skill at a disclosure level.
func (s *Server) GetSkill(ctx context.Context, req *baagentv1.GatewayServiceGetSkillRequest) (*baagentv1.GatewayServiceGetSkillResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateGetSkill(req); err != nil {
		return nil, s.rejected(ctx, "GetSkill", err)
	}
	return s.getSkill(ctx, tenant, req)
}

// ListTools lists the tools the caller may use.
func (s *Server) ListTools(ctx context.Context, _ *baagentv1.GatewayServiceListToolsRequest) (*baagentv1.GatewayServiceListToolsResponse, error) {
	// GatewayServiceListToolsRequest has no fields to validate.
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.listTools(ctx, tenant)
}

func (s *Server) listTools(ctx context.Context, tenant string) (*baagentv1.GatewayServiceListToolsResponse, error) {
	if err := s.peerReady(s.opts.ToolRunner == nil, "toolrunner"); err != nil {
		return nil, err
	}
	resp, err := s.opts.ToolRunner.ListTools(ctx, &baagentv1.ListToolsRequest{Tenant: tenant})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "ListTools", err)
	}
	return &baagentv1.GatewayServiceListToolsResponse{Tools: resp.GetTools(), Servers: resp.GetServers()}, nil
}

// InvokeTool invokes a tool directly, outside a run.
func (s *Server) InvokeTool(ctx context.Context, req *baagentv1.InvokeToolRequest) (*baagentv1.InvokeToolResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateInvokeTool(req); err != nil {
		return nil, s.rejected(ctx, "InvokeTool", err)
	}
	if err := s.peerReady(s.opts.ToolRunner == nil, "toolrunner"); err != nil {
		return nil, err
	}
	conv := req.GetConversationId()
	if conv == "" {
		conv = scratchConversation
	}
	resp, err := s.opts.ToolRunner.Invoke(ctx, &baagentv1.InvokeRequest{Request: &baagentv1.ToolInvocationRequest{
		ToolCallId:     req.GetToolCallId(),
		ToolName:       req.GetToolName(),
		Parameters:     req.GetParameters(),
		OutputLevel:    req.GetOutputLevel(),
		CallerId:       callerGateway,
		Tenant:         tenant,
		ConversationId: conv,
	}})
	if err != nil {
		return nil, peerError(ctx, "toolrunner", "Invoke", err)
	}
	return &baagentv1.InvokeToolResponse{Result: resp.GetResult()}, nil
}

// CountTokens counts the tokens of a text for a model.
func (s *Server) CountTokens(ctx context.Context, req *baagentv1.GatewayServiceCountTokensRequest) (*baagentv1.GatewayServiceCountTokensResponse, error) {
	_, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.validateCountTokens(req); err != nil {
		return nil, s.rejected(ctx, "CountTokens", err)
	}
	return s.countTokens(ctx, req)
}

func (s *Server) countTokens(ctx context.Context, req *baagentv1.GatewayServiceCountTokensRequest) (*baagentv1.GatewayServiceCountTokensResponse, error) {
	if err := s.peerReady(s.opts.Tokens == nil, "tokens"); err != nil {
		return nil, err
	}
	resp, err := s.opts.Tokens.CountTokens(ctx, &baagentv1.CountTokensRequest{Model: req.GetModel(), Text: req.GetText(), AllowSpecialTokens: req.GetAllowSpecialTokens()})
	if err != nil {
		return nil, peerError(ctx, "tokens", "CountTokens", err)
	}
	return &baagentv1.GatewayServiceCountTokensResponse{Count: resp}, nil
}

func (s *Server) peerReady(missing bool, peer string) error {
	if err := s.ready(); err != nil {
		return err
	}
	if missing {
		return missingPeer(peer)
	}
	return nil
}
