package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/toolerror"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
)

// callResult is the outcome of one tool call.
type callResult struct {
	msg     *baagentv1.ChatMessage   // the tool message answering the call
	inject  []*baagentv1.ChatMessage // messages a skill activation injects
	observe *baagentv1.ObservePayload
	metrics *baagentv1.ToolMetrics
	// approval: the toolrunner refused to run the call until the user
	// approves it (permission ASK); nothing ran.
	approval bool
	// inner are the act/observe events of the calls a tool composition
	// made, emitted between the composition's act and its observe.
	inner []*baagentv1.Event
	// recalled is the memory_recalled event of a memory_search call,
	// emitted after its observe.
	recalled *baagentv1.MemoryRecalledPayload
}

// observed publishes a result's observe event and records its metrics.
func (r *run) observed(res *callResult) error {
	r.metrics.RecordToolCall(res.metrics)
	outcome := toolOK
	if !res.observe.GetSuccess() {
		outcome = toolFailed
		switch res.observe.GetErrorCode() {
		case codeInvalidJSON:
			outcome = toolInvalidArgs
		case codeUnknownTool:
			outcome = toolUnknown
		}
	}
	r.s.metrics.toolCalls.WithLabelValues(outcome).Inc()
	promx.Observe(r.ctx, r.s.metrics.toolDuration, res.observe.GetDurationMs()/1000)
	for _, ev := range res.inner {
		if err := r.emit(ev); err != nil {
			return err
		}
	}
	r.notes.note(res.observe)
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Observe{Observe: res.observe}}); err != nil {
		return err
	}
	if res.recalled != nil {
		return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_MemoryRecalled{MemoryRecalled: res.recalled}})
	}
	return nil
}

// innerEvents are the act and observe events of the calls a tool
// composition made (docs/concepts/events.md), each carrying the
// composition's call id as parent_tool_call_id.
func innerEvents(parent string, calls []*baagentv1.InnerToolCall) []*baagentv1.Event {
	var out []*baagentv1.Event
	for _, ic := range calls {
		res := ic.GetResult()
		out = append(out,
			&baagentv1.Event{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{
				ToolCallId: ic.GetToolCallId(), ToolName: ic.GetToolName(), ToolInput: ic.GetArguments(), ParentToolCallId: parent,
			}}},
			&baagentv1.Event{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{
				ToolCallId: ic.GetToolCallId(), ToolName: ic.GetToolName(), Observation: res.GetObservation(),
				Success: res.GetSuccess(), ErrorType: res.GetErrorType(), ErrorCode: res.GetErrorCode(),
				DurationMs: res.GetDurationMs(), ArtifactId: res.GetArtifactId(), RetryCount: res.GetRetryCount(),
				OutputLevel: res.GetOutputLevel(), Cached: res.GetCached(), ParentToolCallId: parent,
			}}})
	}
	return out
}

// Error codes of observations the orchestrator produces itself.
const (
	codeInvalidJSON        = "INVALID_JSON_ARGUMENTS"
	codeUnknownTool        = "UNKNOWN_TOOL"
	codeInvalidArguments   = "INVALID_ARGUMENTS"
	codeSkillRefused       = "SKILL_ACTIVATION_REFUSED"
	codeSkillNotFound      = "SKILL_NOT_FOUND"
	codeToolRequestRefused = "TOOL_REQUEST_REFUSED"
)

// invoke runs one tool call on the toolrunner. Malformed arguments, unknown
// tools, refused requests and a write whose toolrunner went away mid-call
// become error observations the model sees; only a toolrunner that is down
// (after the retries of a read-only call, see toolretry.go) or
// unimplemented is fatal.
// The call carries the record's idempotency key, so a call re-invoked after
// a crash is answered from the toolrunner's record if it had completed.
func (r *run) invoke(ctx context.Context, c *baagentv1.ToolCall, ts *toolset, caller string, usage float64, idemKey string, approved bool) (*callResult, error) {
	return r.toolSpan(ctx, c, func(ctx context.Context) (*callResult, error) {
		return r.invokeTool(ctx, c, ts, caller, usage, idemKey, approved)
	})
}

func (r *run) invokeTool(ctx context.Context, c *baagentv1.ToolCall, ts *toolset, caller string, usage float64, idemKey string, approved bool) (*callResult, error) {
	began := time.Now()
	if ts.defs[c.GetName()] == nil {
		avail := slices.Clone(ts.names)
		if ts.skill {
			avail = append(avail, SkillToolName)
		}
		if ts.read {
			avail = append(avail, SkillReadToolName)
		}
		if ts.task {
			avail = append(avail, TaskToolName)
		}
		avail = append(avail, ts.ask...)
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, codeUnknownTool,
			fmt.Sprintf("There is no tool named %q available now. Available tools: %s.", c.GetName(), strings.Join(avail, ", "))), nil
	}
	args, err := parseArgs(c.GetArguments())
	if err != nil {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidJSON,
			fmt.Sprintf("The arguments are not a valid JSON object (%v). Call the tool again with a JSON object matching its schema.", err)), nil
	}
	readOnly := ts.defs[c.GetName()].GetReadOnly()
	resp, err := r.invokeToolRunner(ctx, &baagentv1.InvokeRequest{Request: &baagentv1.ToolInvocationRequest{
		ToolCallId:     c.GetId(),
		ToolName:       c.GetName(),
		Parameters:     args,
		CallerId:       caller,
		Tenant:         r.rec.GetTenant(),
		ConversationId: r.workspaceConversation(),
		RunId:          r.rec.GetRunId(),
		ContextUsage:   usage,
		AllowedTools:   ts.allow,
		IdempotencyKey: idemKey,
		Approved:       approved,
	}})
	if err != nil {
		switch status.Code(err) {
		case codes.Unavailable:
			if ctx.Err() == nil && !readOnly {
				return r.lostWrite(c, began, err), nil
			}
		case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition:
			if ctx.Err() == nil {
				return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeToolRequestRefused,
					"The tool call was refused: "+status.Convert(err).Message()), nil
			}
		}
		return nil, peerError(ctx, "toolrunner", "Invoke", err)
	}
	res := resp.GetResult()
	if res.GetApprovalRequired() && !approved {
		return &callResult{approval: true}, nil
	}
	obs := res.GetObservation()
	if !res.GetSuccess() && obs == "" {
		obs = toolerror.Observation(c.GetId(), res.GetErrorType(), res.GetErrorCode(), res.GetErrorMessage())
	}
	dur := res.GetDurationMs()
	if dur == 0 {
		dur = float64(time.Since(began).Microseconds()) / 1000
	}
	cr := r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: obs,
		Success:     res.GetSuccess(),
		ErrorType:   res.GetErrorType(),
		ErrorCode:   res.GetErrorCode(),
		DurationMs:  dur,
		ArtifactId:  res.GetArtifactId(),
		RetryCount:  res.GetRetryCount(),
		OutputLevel: res.GetOutputLevel(),
		Cached:      res.GetCached(),
	})
	cr.inner = innerEvents(c.GetId(), res.GetInnerCalls())
	cr.recalled = recalledPayload(c, args, res)
	return cr, nil
}

// failedCall is a call answered by the orchestrator with an error
// observation in the standard format (docs/concepts/errors-and-retries.md).
func (r *run) failedCall(c *baagentv1.ToolCall, began time.Time, t baagentv1.ToolErrorType, code, msg string) *callResult {
	return r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: toolerror.Observation(c.GetId(), t, code, msg),
		ErrorType:   t,
		ErrorCode:   code,
		DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
	})
}

// result builds the tool message and the ToolMetrics of a call.
func (r *run) result(c *baagentv1.ToolCall, began time.Time, obs *baagentv1.ObservePayload) *callResult {
	end := began.Add(time.Duration(obs.GetDurationMs() * float64(time.Millisecond)))
	var in, out int64
	var wg sync.WaitGroup
	wg.Go(func() { in = r.countTokens(c.GetArguments()) })
	out = r.countTokens(obs.GetObservation())
	wg.Wait()
	return &callResult{
		msg: &baagentv1.ChatMessage{
			Role:       baagentv1.Role_ROLE_TOOL,
			Content:    obs.GetObservation(),
			ToolCallId: c.GetId(),
			ToolName:   c.GetName(),
			IsError:    !obs.GetSuccess(),
		},
		observe: obs,
		metrics: &baagentv1.ToolMetrics{
			ToolName:     c.GetName(),
			ToolCallId:   c.GetId(),
			StartTime:    timestamppb.New(began),
			EndTime:      timestamppb.New(end),
			DurationMs:   obs.GetDurationMs(),
			InputTokens:  in,
			OutputTokens: out,
			TotalTokens:  in + out,
			Success:      obs.GetSuccess(),
			ErrorCode:    obs.GetErrorCode(),
			RetryCount:   obs.GetRetryCount(),
			OutputLevel:  obs.GetOutputLevel(),
		},
	}
}

// countTokens counts text for the run's model on the tokens service; 0 when
// it cannot (the metrics then under-report rather than guess).
func (r *run) countTokens(text string) int64 {
	if text == "" {
		return 0
	}
	resp, err := r.s.opts.Tokens.CountTokens(r.ctx, &baagentv1.CountTokensRequest{Model: r.rec.GetModel(), Text: text})
	if err != nil {
		r.log.Debug("token count unavailable for tool metrics", "error", err)
		return 0
	}
	return resp.GetCount()
}

// parseArgs parses a tool call's arguments as a JSON object. Empty
// arguments are an empty object (models send "" for tools without
// parameters).
func parseArgs(args string) (*structpb.Struct, error) {
	if strings.TrimSpace(args) == "" {
		return &structpb.Struct{}, nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(args), s); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "proto: "))
	}
	return s, nil
}
