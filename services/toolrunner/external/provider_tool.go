package external

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// emptyObjectSchema is published for a tool that declares no parameters.
var emptyObjectSchema = json.RawMessage(`{"type":"object"}`)

// providerTool is one tool of a ToolProvider.
type providerTool struct {
	src  *providerSource
	spec tool.Spec
}

// providerTools turns a DescribeTools answer into tools, refusing malformed
// definitions (with the reason) and names reserved for MCP tools.
func providerTools(p *providerSource, defs []*baagentv1.ToolDefinition) ([]tool.Tool, []refusal) {
	var tools []tool.Tool
	var refused []refusal
	if len(defs) > validate.MaxTools {
		refused = append(refused, refusal{fmt.Sprintf("(%d tools beyond the first %d)", len(defs)-validate.MaxTools, validate.MaxTools), "too many tools"})
		defs = defs[:validate.MaxTools]
	}
	for i, d := range defs {
		name := d.GetSchema().GetName()
		if !p.keep(name) {
			continue
		}
		spec, err := providerSpec(p, d)
		if err != nil {
			if name == "" || !validName(name) {
				name = fmt.Sprintf("tools[%d]", i)
			}
			refused = append(refused, refusal{name, err.Error()})
			continue
		}
		tools = append(tools, &providerTool{src: p, spec: spec})
	}
	return tools, refused
}

func validName(n string) bool {
	var e validate.Errors
	validate.ToolName(&e, "name", n)
	return e.Len() == 0
}

// providerSpec validates one definition like the toolrunner's own edge
// validation would, and builds its Spec. The provider's permission field is
// ignored: permissions are the operator's policy, not the provider's.
func providerSpec(p *providerSource, d *baagentv1.ToolDefinition) (tool.Spec, error) {
	var e validate.Errors
	validate.ToolSchema(&e, "schema", d.GetSchema())
	validate.Optional(&e, "version", d.GetVersion(), validate.Version)
	validate.Enum(&e, "default_output_level", d.GetDefaultOutputLevel(), baagentv1.OutputLevel_name, true)
	validate.Enum(&e, "cache_policy", d.GetCachePolicy(), baagentv1.ToolCachePolicy_name, true)
	validate.NonNegative(&e, "default_timeout_ms", d.GetDefaultTimeoutMs())
	if d.GetDefaultTimeoutMs() > int64(maxAttemptTimeout/time.Millisecond) {
		e.Addf("default_timeout_ms", "must be at most %d", int64(maxAttemptTimeout/time.Millisecond))
	}
	if err := e.Err(); err != nil {
		return tool.Spec{}, fmt.Errorf("invalid definition: %s", strings.TrimPrefix(err.Error(), "rpc error: code = InvalidArgument desc = invalid argument: "))
	}
	name := d.GetSchema().GetName()
	if strings.HasPrefix(name, "mcp__") {
		return tool.Spec{}, fmt.Errorf("the mcp__ prefix is reserved for MCP tools")
	}
	params := emptyObjectSchema
	if s := d.GetSchema().GetParameters(); s != nil {
		b, err := json.Marshal(s.AsMap())
		if err != nil {
			return tool.Spec{}, fmt.Errorf("parameters: %w", err)
		}
		params = b
	}
	timeout := time.Duration(d.GetDefaultTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = p.attemptTimeout()
	}
	return tool.Spec{
		Name:               name,
		Description:        d.GetSchema().GetDescription(),
		Version:            d.GetVersion(),
		Parameters:         params,
		ReadOnly:           d.GetReadOnly(),
		DefaultOutputLevel: d.GetDefaultOutputLevel(),
		CachePolicy:        d.GetCachePolicy(),
		Retry:              d.GetRetryPolicy(),
		Timeout:            timeout,
		Source:             p.name,
	}, nil
}

// Spec implements tool.Tool.
func (t *providerTool) Spec() tool.Spec { return t.spec }

// Execute implements tool.Tool: one ExecuteTool RPC bounded by ctx.
func (t *providerTool) Execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	params, err := structpb.NewStruct(call.Args)
	if err != nil {
		return tool.Result{}, &tool.Error{Type: typeInvalid, Code: "INVALID_PARAMETERS", Message: "the arguments are not representable as JSON: " + err.Error(), Err: err}
	}
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.spec.Timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	req := &baagentv1.ExecuteToolRequest{
		ToolCallId:     call.ToolCallID,
		ToolName:       t.spec.Name,
		Parameters:     params,
		TimeoutMs:      max(time.Until(deadline).Milliseconds(), 1),
		CallerId:       call.CallerID,
		Tenant:         call.Tenant,
		ConversationId: call.ConversationID,
		Attempt:        int32(min(call.Attempt, 1<<30)),
		IdempotencyKey: call.IdempotencyKey,
	}
	client, _ := t.src.current()
	if client == nil {
		return tool.Result{}, unavailable(t.src.name)
	}
	resp, err := client.ExecuteTool(ctx, req)
	if err != nil {
		return tool.Result{}, grpcError(ctx, t.src.cfg.Name, err)
	}
	switch o := resp.GetOutcome().(type) {
	case *baagentv1.ExecuteToolResponse_Data:
		return tool.Result{Data: o.Data.AsInterface()}, nil
	case *baagentv1.ExecuteToolResponse_Error:
		return tool.Result{}, providerError(o.Error)
	default:
		return tool.Result{}, &tool.Error{Type: typeDependency, Code: "PROVIDER_PROTOCOL_ERROR", Message: errNoOutcome.Error(), Err: errNoOutcome}
	}
}
