package skills

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Request limits.
const (
	// MaxDepthLimit caps SkillActivationRequest.max_depth (the default is 3).
	MaxDepthLimit = 16
	// MaxActivationChain caps activation_chain and activation_depth.
	MaxActivationChain = 64
)

// Edge validation of every SkillsService request. Each function returns nil
// or an InvalidArgument status naming every offending field. Whether a skill
// exists, is disabled, or would close a cycle is decided by the service, not
// here.

func validateListSkills(req *baagentv1.ListSkillsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.Enum(&e, "scope", req.GetScope(), baagentv1.SkillScopeFilter_name, true)
	if req.GetScope() == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT && req.GetProject() == "" {
		e.Add("project", "required with scope SKILL_SCOPE_FILTER_PROJECT")
	}
	return e.Err()
}

func validateGetSkill(req *baagentv1.GetSkillRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "name", req.GetName())
	validate.Enum(&e, "level", req.GetLevel(), baagentv1.SkillLoadLevel_name, true)
	return e.Err()
}

func validateGetCatalog(req *baagentv1.GetCatalogRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.Optional(&e, "model", req.GetModel(), validate.Model)
	validate.NonNegative(&e, "token_budget", req.GetTokenBudget())
	return e.Err()
}

func (s *Server) validateActivateSkill(req *baagentv1.ActivateSkillRequest) error {
	var e validate.Errors
	a := req.GetActivation()
	if a == nil {
		e.Add("activation", "required")
		return e.Err()
	}
	const f = "activation"
	validate.SkillName(&e, f+".skill_name", a.GetSkillName())
	validate.ID(&e, f+".activation_id", a.GetActivationId())
	validate.Optional(&e, f+".conversation_id", a.GetConversationId(), validate.ID)
	validate.Text(&e, f+".user_request", a.GetUserRequest(), validate.MaxRunInputBytes)
	validate.MaxItems(&e, f+".conversation_history", len(a.GetConversationHistory()), s.opts.MaxHistoryMessages)
	validate.ChatMessages(&e, f+".conversation_history", a.GetConversationHistory(), s.opts.MaxMessageBytes)
	validate.Enum(&e, f+".load_level", a.GetLoadLevel(), baagentv1.SkillLoadLevel_name, true)
	validate.Range(&e, f+".activation_depth", a.GetActivationDepth(), 0, MaxActivationChain)
	validate.Range(&e, f+".max_depth", a.GetMaxDepth(), 0, MaxDepthLimit)
	chain := a.GetActivationChain()
	validate.MaxItems(&e, f+".activation_chain", len(chain), MaxActivationChain)
	for i, name := range chain {
		validate.SkillName(&e, validate.Index(f+".activation_chain", i), name)
	}
	validate.Tenant(&e, f+".tenant", a.GetTenant())
	validate.Optional(&e, f+".project", a.GetProject(), validate.ID)
	validate.Enum(&e, f+".origin", a.GetOrigin(), baagentv1.SkillActivationOrigin_name, true)
	validate.Optional(&e, f+".revision", a.GetRevision(), validate.Version)
	return e.Err()
}

// validateReadSkillResource: the path must stay inside the skill folder; a
// limit above the 256 KiB cap is shortened to the cap by the reader (the
// contract says "default and cap"), so only a negative limit is refused.
func validateReadSkillResource(req *baagentv1.ReadSkillResourceRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "skill_name", req.GetSkillName())
	validate.RelativePath(&e, "path", req.GetPath())
	validate.NonNegative(&e, "offset", req.GetOffset())
	validate.NonNegative(&e, "limit", req.GetLimit())
	validate.Optional(&e, "revision", req.GetRevision(), validate.Version)
	if req.GetLines() {
		if req.GetOffset() != 0 {
			e.Add("offset", "must be 0 when lines is set; use line_offset")
		}
		if req.GetLimit() != 0 {
			e.Add("limit", "must be 0 when lines is set; use line_limit")
		}
		validate.NonNegative(&e, "line_offset", req.GetLineOffset())
		validate.NonNegative(&e, "line_limit", int64(req.GetLineLimit()))
	} else {
		if req.GetLineOffset() != 0 {
			e.Add("line_offset", "needs lines set")
		}
		if req.GetLineLimit() != 0 {
			e.Add("line_limit", "needs lines set")
		}
	}
	return e.Err()
}
