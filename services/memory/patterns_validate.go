package memory

import (
	"strings"

	"github.com/baagent/baagent/core/patterns"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// taskTypeFilter checks ListPatternsRequest.task_type: a short name.
func taskTypeFilter(e *validate.Errors, field, v string) {
	validate.Name(e, field, v)
	validate.MaxBytes(e, field, v, MaxTypeBytes)
}

// patternText checks optional free text of an edit: valid UTF-8, no NUL,
// at most n bytes.
func patternText(e *validate.Errors, field, v string, n int) {
	validate.Text(e, field, v, n)
	noNUL(e, field, v)
}

// patternTool checks a tool name of an edit.
func patternTool(e *validate.Errors, field, v string) {
	validate.Name(e, field, v)
	validate.MaxBytes(e, field, v, MaxToolNameBytes)
}

func validateMatchPatterns(r *baagentv1.MatchPatternsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.RequiredText(&e, "goal", r.GetGoal(), MaxGoalBytes)
	noNUL(&e, "goal", r.GetGoal())
	validate.Optional(&e, "conversation_id", r.GetConversationId(), validate.ID)
	return e.Err()
}

// validateRecordTrace refuses what no trace can do without (the tenant,
// the run id, the goal) and malformed references (the conversation, the
// pattern used and its mode); lengths are cut by traceFromProto instead.
func validateRecordTrace(r *baagentv1.RecordTraceRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	t := r.GetTrace()
	if t == nil {
		e.Add("trace", "required")
		return e.Err()
	}
	validate.RunID(&e, "trace.run_id", t.GetRunId())
	if strings.TrimSpace(strings.ReplaceAll(t.GetUserGoal(), "\x00", "")) == "" {
		e.Add("trace.user_goal", "required")
	}
	validate.Optional(&e, "trace.conversation_id", t.GetConversationId(), validate.ID)
	if id := t.GetPatternId(); id != "" {
		memoryID(&e, "trace.pattern_id", id, patternPrefix)
	}
	switch t.GetPatternMode() {
	case "", "reuse", "reference":
	default:
		e.Add("trace.pattern_mode", `must be "reuse", "reference" or empty`)
	}
	if t.GetPatternMode() != "" && t.GetPatternId() == "" {
		e.Add("trace.pattern_id", "required when pattern_mode is set")
	}
	return e.Err()
}

func validateListPatterns(r *baagentv1.ListPatternsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	validate.Optional(&e, "task_type", r.GetTaskType(), taskTypeFilter)
	validate.Enum(&e, "state", r.GetState(), baagentv1.PatternState_name, true)
	page(&e, r.GetPageSize(), r.GetPageToken())
	return e.Err()
}

func validateUpdatePattern(r *baagentv1.UpdatePatternRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	memoryID(&e, "id", r.GetId(), patternPrefix)
	validate.NonNegative(&e, "expected_version", r.GetExpectedVersion())
	ed := r.GetEdit()
	if ed == nil {
		e.Add("edit", "required")
		return e.Err()
	}
	if ed.Name == nil && ed.Description == nil && !ed.GetReplaceSteps() && ed.GetToolChain() == nil {
		e.Add("edit", "changes nothing: set name, description, replace_steps or tool_chain")
	}
	if ed.Name != nil {
		validate.RequiredText(&e, "edit.name", strings.TrimSpace(ed.GetName()), MaxPatternNameBytes)
		noNUL(&e, "edit.name", ed.GetName())
	}
	if ed.Description != nil {
		patternText(&e, "edit.description", ed.GetDescription(), MaxPatternDescriptionBytes)
	}
	if !ed.GetReplaceSteps() && len(ed.GetSteps()) > 0 {
		e.Add("edit.replace_steps", "required when steps are given")
	}
	if ed.GetReplaceSteps() {
		steps := ed.GetSteps()
		if len(steps) == 0 {
			e.Add("edit.steps", "must not be empty when replace_steps is set")
		}
		validate.MaxItems(&e, "edit.steps", len(steps), patterns.MaxSteps)
		for i, st := range capped(steps, patterns.MaxSteps) {
			f := validate.Index("edit.steps", i)
			if st == nil {
				e.Add(f, "required")
				continue
			}
			validate.RequiredText(&e, f+".description", st.GetDescription(), MaxPatternStepTextBytes)
			noNUL(&e, f+".description", st.GetDescription())
			patternText(&e, f+".expected_output", st.GetExpectedOutput(), MaxPatternStepTextBytes)
			validate.MaxItems(&e, f+".tools", len(st.GetTools()), patterns.MaxToolChainLength)
			for j, tool := range capped(st.GetTools(), patterns.MaxToolChainLength) {
				patternTool(&e, validate.Index(f+".tools", j), tool)
			}
			validate.MaxItems(&e, f+".corrections", len(st.GetCorrections()), patterns.MaxCorrectionsPerStep)
			for j, c := range capped(st.GetCorrections(), patterns.MaxCorrectionsPerStep) {
				validate.RequiredText(&e, validate.Index(f+".corrections", j), c, MaxPatternCorrectionBytes)
				noNUL(&e, validate.Index(f+".corrections", j), c)
			}
		}
	}
	if tc := ed.GetToolChain(); tc != nil {
		tools := tc.GetTools()
		if len(tools) == 0 {
			e.Add("edit.tool_chain.tools", "must not be empty")
		}
		validate.MaxItems(&e, "edit.tool_chain.tools", len(tools), patterns.MaxToolChainLength)
		for j, tool := range capped(tools, patterns.MaxToolChainLength) {
			patternTool(&e, validate.Index("edit.tool_chain.tools", j), tool)
		}
	}
	return e.Err()
}

func validateMarkPatternUseless(r *baagentv1.MarkPatternUselessRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	memoryID(&e, "id", r.GetId(), patternPrefix)
	patternText(&e, "reason", r.GetReason(), MaxReasonBytes)
	return e.Err()
}

func validateGrant(tenant, id, grantee string) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", tenant)
	memoryID(&e, "id", id, patternPrefix)
	validate.Tenant(&e, "grantee_tenant", grantee)
	if grantee != "" && grantee == tenant {
		e.Add("grantee_tenant", "must not be the owner tenant: a pattern is its owner's already")
	}
	return e.Err()
}

func validateListPatternGrants(r *baagentv1.ListPatternGrantsRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", r.GetTenant())
	if id := r.GetId(); id != "" {
		memoryID(&e, "id", id, patternPrefix)
	}
	return e.Err()
}
