package orchestrator

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// codeSkillResource is the error of a skill_read the skills service
// refused (missing file, binary, outside the folder).
const codeSkillResource = "SKILL_RESOURCE_UNREADABLE"

// readSkill answers skill_read: a page of a resource file of an active
// skill, at the revision its activation loaded. The page is the skills
// service's line page (ReadSkillResource with lines): numbered lines cut
// and paged by the rule of the toolrunner's file_read
// (docs/concepts/tools.md#truncation), with its hints, so the model reads
// a skill's files as it reads the workspace's; offset is a 0-based line.
// The orchestrator adds only the header naming the file.
func (r *run) readSkill(ctx context.Context, c *baagentv1.ToolCall) (*callResult, error) {
	began := time.Now()
	a, err := parseSkillReadArgs(c.GetArguments())
	if err != nil {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, err.Error()), nil
	}
	r.cpMu.Lock()
	frame, ok := r.skills.Innermost()
	if a.skill != "" {
		frame, ok = r.skills.Find(a.skill)
	}
	chain := r.skills.Chain()
	r.cpMu.Unlock()
	if !ok {
		name := a.skill
		if name == "" {
			name = "(none)"
		}
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeSkillNotActive,
			fmt.Sprintf("skill_read reads only the files of an active skill; %q is not active. %s Activate the skill first.", name, activeSkillsSentence(chain))), nil
	}
	resp, err := r.s.opts.Skills.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{
		Tenant:     r.rec.GetTenant(),
		Project:    r.rec.GetProject(),
		SkillName:  frame.Name,
		Path:       a.path,
		Revision:   frame.Revision,
		Lines:      true,
		LineOffset: a.offset,
	})
	if err != nil && ctx.Err() == nil {
		st := status.Convert(err)
		var kind baagentv1.ToolErrorType
		switch st.Code() {
		case codes.NotFound:
			kind = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND
		case codes.PermissionDenied:
			kind = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED
		case codes.InvalidArgument, codes.OutOfRange:
			kind = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS
		case codes.FailedPrecondition:
			kind = baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR
		}
		if kind != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_UNSPECIFIED {
			return r.failedCall(c, began, kind, codeSkillResource, st.Message()), nil
		}
	}
	if err != nil {
		return nil, peerError(ctx, "skills", "ReadSkillResource", err)
	}
	return r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: fmt.Sprintf("%s of skill %s:\n%s", a.path, frame.Name, resp.GetContent()),
		Success:     true,
		DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
	}), nil
}
