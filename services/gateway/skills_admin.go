package gateway

import (
	"context"
	"strconv"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Tenant skill management: PutSkill, DeleteSkill and SetSystemSkillState,
// forwarded to the skills service for the caller's tenant (from the API
// key). The skills service decides what a skill is and stores it; the edge
// refuses what can never succeed before it crosses the network (a bad name
// or project, a missing or over-size content) and passes the service's
// codes through: Aborted for a failed If-Match / If-None-Match, NotFound,
// InvalidArgument for a bad archive, Unimplemented when the skill store is
// off.

// DefaultMaxSkillBytes bounds an uploaded skill (the SKILL.md or the
// archive of its folder): the skills store's own limit on an upload as
// sent (its MaxArchiveBytes, 10 MiB), so that the gateway refuses early
// exactly what the store would refuse. The gateway may not import the
// skills service; cmd/baagent/app's tests check the two stay equal.
const DefaultMaxSkillBytes = 10 << 20

// revisionRule checks an If-Match revision: an opaque token (a store
// revision or a content hash), compared by the skills service.
var revisionRule validate.Rule = validate.Cursor

// projectWriteRule checks the project of a write: it becomes a key of the
// skill store, so it is a token ([A-Za-z0-9_-]), stricter than the ids
// reads accept.
var projectWriteRule validate.Rule = validate.RunID

// PutSkill creates or replaces a tenant or project skill.
func (s *Server) PutSkill(ctx context.Context, req *baagentv1.GatewayServicePutSkillRequest) (*baagentv1.GatewayServicePutSkillResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.validatePutSkill(req); err != nil {
		s.skillMetrics.observe(skillOpPut, apiGRPC, err)
		return nil, s.rejected(ctx, "PutSkill", err)
	}
	resp, err := s.putSkill(ctx, tenant, req)
	s.skillMetrics.observe(skillOpPut, apiGRPC, err)
	return resp, err
}

func (s *Server) putSkill(ctx context.Context, tenant string, req *baagentv1.GatewayServicePutSkillRequest) (*baagentv1.GatewayServicePutSkillResponse, error) {
	if err := s.peerReady(s.opts.Skills == nil, "skills"); err != nil {
		return nil, err
	}
	s.skillMetrics.uploadBytes.Observe(float64(len(req.GetContent())))
	resp, err := s.opts.Skills.PutSkill(ctx, &baagentv1.PutSkillRequest{
		Tenant:      tenant,
		Project:     req.GetProject(),
		Name:        req.GetName(),
		Content:     req.GetContent(),
		Format:      req.GetFormat(),
		IfMatch:     req.GetIfMatch(),
		IfNoneMatch: req.GetIfNoneMatch(),
	})
	if err != nil {
		return nil, peerError(ctx, "skills", "PutSkill", err)
	}
	return &baagentv1.GatewayServicePutSkillResponse{Skill: resp.GetSkill(), Replaced: resp.GetReplaced()}, nil
}

// DeleteSkill deletes a tenant or project skill.
func (s *Server) DeleteSkill(ctx context.Context, req *baagentv1.GatewayServiceDeleteSkillRequest) (*baagentv1.GatewayServiceDeleteSkillResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateDeleteSkill(req); err != nil {
		s.skillMetrics.observe(skillOpDelete, apiGRPC, err)
		return nil, s.rejected(ctx, "DeleteSkill", err)
	}
	resp, err := s.deleteSkill(ctx, tenant, req)
	s.skillMetrics.observe(skillOpDelete, apiGRPC, err)
	return resp, err
}

func (s *Server) deleteSkill(ctx context.Context, tenant string, req *baagentv1.GatewayServiceDeleteSkillRequest) (*baagentv1.GatewayServiceDeleteSkillResponse, error) {
	if err := s.peerReady(s.opts.Skills == nil, "skills"); err != nil {
		return nil, err
	}
	resp, err := s.opts.Skills.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: tenant, Project: req.GetProject(), Name: req.GetName(), IfMatch: req.GetIfMatch()})
	if err != nil {
		return nil, peerError(ctx, "skills", "DeleteSkill", err)
	}
	return &baagentv1.GatewayServiceDeleteSkillResponse{Revision: resp.GetRevision()}, nil
}

// SetSystemSkillState disables or enables a system skill for the caller's
// tenant (or one of its projects).
func (s *Server) SetSystemSkillState(ctx context.Context, req *baagentv1.GatewayServiceSetSystemSkillStateRequest) (*baagentv1.GatewayServiceSetSystemSkillStateResponse, error) {
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := validateSetSystemSkillState(req); err != nil {
		s.skillMetrics.observe(skillOpState, apiGRPC, err)
		return nil, s.rejected(ctx, "SetSystemSkillState", err)
	}
	resp, err := s.setSystemSkillState(ctx, tenant, req)
	s.skillMetrics.observe(skillOpState, apiGRPC, err)
	return resp, err
}

func (s *Server) setSystemSkillState(ctx context.Context, tenant string, req *baagentv1.GatewayServiceSetSystemSkillStateRequest) (*baagentv1.GatewayServiceSetSystemSkillStateResponse, error) {
	if err := s.peerReady(s.opts.Skills == nil, "skills"); err != nil {
		return nil, err
	}
	resp, err := s.opts.Skills.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: tenant, Project: req.GetProject(), Name: req.GetName(), Disabled: req.GetDisabled()})
	if err != nil {
		return nil, peerError(ctx, "skills", "SetSystemSkillState", err)
	}
	return &baagentv1.GatewayServiceSetSystemSkillStateResponse{Skill: resp.GetSkill()}, nil
}

// validatePutSkill: the content must be there and within the limit; its
// format and what it holds (a SKILL.md whose name is the request's, a
// well-formed archive) are the skills service's to judge.
func (s *Server) validatePutSkill(req *baagentv1.GatewayServicePutSkillRequest) error {
	var e validate.Errors
	validate.Optional(&e, "project", req.GetProject(), projectWriteRule)
	validate.SkillName(&e, "name", req.GetName())
	switch n := len(req.GetContent()); {
	case n == 0:
		e.Add("content", "required: the SKILL.md text or an archive (zip, tar, tar.gz) of the skill folder")
	case int64(n) > s.opts.MaxSkillBytes:
		e.Add("content", "must be at most "+strconv.FormatInt(s.opts.MaxSkillBytes, 10)+" bytes, got "+strconv.Itoa(n))
	}
	validate.Enum(&e, "format", req.GetFormat(), baagentv1.SkillArchiveFormat_name, true)
	validate.Optional(&e, "if_match", req.GetIfMatch(), revisionRule)
	if req.GetIfMatch() != "" && req.GetIfNoneMatch() {
		e.Add("if_none_match", "cannot be combined with if_match: a skill cannot both exist at a revision and not exist")
	}
	return e.Err()
}

func validateDeleteSkill(req *baagentv1.GatewayServiceDeleteSkillRequest) error {
	var e validate.Errors
	validate.Optional(&e, "project", req.GetProject(), projectWriteRule)
	validate.SkillName(&e, "name", req.GetName())
	validate.Optional(&e, "if_match", req.GetIfMatch(), revisionRule)
	return e.Err()
}

func validateSetSystemSkillState(req *baagentv1.GatewayServiceSetSystemSkillStateRequest) error {
	var e validate.Errors
	validate.Optional(&e, "project", req.GetProject(), projectWriteRule)
	validate.SkillName(&e, "name", req.GetName())
	return e.Err()
}

// validateSkillScope checks a listing's scope filter: a project listing
// needs its project.
func validateSkillScope(e *validate.Errors, scope baagentv1.SkillScopeFilter, project string) {
	validate.Enum(e, "scope", scope, baagentv1.SkillScopeFilter_name, true)
	if scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT && project == "" {
		e.Add("project", "required with scope SKILL_SCOPE_FILTER_PROJECT (project)")
	}
}
