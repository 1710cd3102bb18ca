package gateway

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Edge validation of every GatewayService request. Each function returns nil
// or an InvalidArgument status naming every offending field. There is no
// tenant field: the tenant comes from the caller's API key.

func validateStartRun(req *baagentv1.StartRunRequest) error {
	var e validate.Errors
	validate.RunSpec(&e, "spec", req.GetSpec())
	return e.Err()
}

func validateGetRun(req *baagentv1.GetRunRequest) error {
	var e validate.Errors
	validate.RunID(&e, "run_id", req.GetRunId())
	return e.Err()
}

func validateListRuns(req *baagentv1.ListRunsRequest) error {
	var e validate.Errors
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	validate.RunStates(&e, "states", req.GetStates())
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateCancelRun(req *baagentv1.CancelRunRequest) error {
	var e validate.Errors
	validate.RunID(&e, "run_id", req.GetRunId())
	validate.Text(&e, "reason", req.GetReason(), validate.MaxReasonBytes)
	return e.Err()
}

func validateSubmitInput(req *baagentv1.SubmitInputRequest) error {
	var e validate.Errors
	validate.RunID(&e, "run_id", req.GetRunId())
	validate.RunInput(&e, "input", req.GetInput())
	return e.Err()
}

// validateStreamRunEvents: after is empty (live only), `earliest`, or an
// opaque cursor from an event.
func validateStreamRunEvents(req *baagentv1.StreamRunEventsRequest) error {
	var e validate.Errors
	validate.RunID(&e, "run_id", req.GetRunId())
	validate.Optional(&e, "after", req.GetAfter(), validate.Cursor)
	return e.Err()
}

func validateListSkills(req *baagentv1.GatewayServiceListSkillsRequest) error {
	var e validate.Errors
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validateSkillScope(&e, req.GetScope(), req.GetProject())
	return e.Err()
}

func validateGetSkill(req *baagentv1.GatewayServiceGetSkillRequest) error {
	var e validate.Errors
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "name", req.GetName())
	validate.Enum(&e, "level", req.GetLevel(), baagentv1.SkillLoadLevel_name, true)
	return e.Err()
}

// validateInvokeTool: the tool name is checked leniently (an unknown tool is
// a NOT_FOUND result, not a bad request); tool_call_id is required because
// outside a run there is no model to issue one and the platform never
// invents one.
func validateInvokeTool(req *baagentv1.InvokeToolRequest) error {
	var e validate.Errors
	validate.ToolCallName(&e, "tool_name", req.GetToolName())
	validate.Struct(&e, "parameters", req.GetParameters())
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	validate.Enum(&e, "output_level", req.GetOutputLevel(), baagentv1.OutputLevel_name, true)
	validate.ToolCallID(&e, "tool_call_id", req.GetToolCallId())
	return e.Err()
}

func (s *Server) validateCountTokens(req *baagentv1.GatewayServiceCountTokensRequest) error {
	var e validate.Errors
	validate.Model(&e, "model", req.GetModel())
	validate.Text(&e, "text", req.GetText(), s.opts.MaxTextBytes)
	return e.Err()
}

func validateStartRunStream(req *baagentv1.StartRunStreamRequest) error {
	var e validate.Errors
	validate.RunSpec(&e, "spec", req.GetSpec())
	return e.Err()
}
