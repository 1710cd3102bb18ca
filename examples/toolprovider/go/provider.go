package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// toolSpec is one tool this provider serves.
type toolSpec struct {
	name        string
	description string
	schema      string // JSON Schema of the arguments
	run         func(args map[string]any) (any, *toolError)
}

// provider implements baagentv1.ToolProviderServiceServer.
type provider struct {
	baagentv1.UnimplementedToolProviderServiceServer
	log   *slog.Logger
	tools []toolSpec
	defs  []*baagentv1.ToolDefinition
}

func newProvider(rates rateTable, log *slog.Logger) *provider {
	holidays := `"holidays":{"type":"array","items":{"type":"string","format":"date"},"maxItems":1000,"description":"Dates (YYYY-MM-DD) that are not working days, e.g. public holidays."}`
	tools := []toolSpec{
		{
			name:        "convert_currency",
			description: "Convert an amount of money between currencies with the provider's rate table. The result names the rate used, its date and its source; known currencies: " + joinCodes(rates.codes()) + ".",
			schema:      `{"type":"object","properties":{"amount":{"type":"number","description":"Amount in the source currency."},"from":{"type":"string","pattern":"^[A-Za-z]{3}$","description":"ISO 4217 code of the source currency, e.g. EUR."},"to":{"type":"string","pattern":"^[A-Za-z]{3}$","description":"ISO 4217 code of the target currency, e.g. USD."}},"required":["amount","from","to"],"additionalProperties":false}`,
			run:         func(a map[string]any) (any, *toolError) { return convertCurrency(rates, a) },
		},
		{
			name:        "business_days",
			description: "Count the working days (Monday to Friday, minus the given holidays) from start to end, both included, like NETWORKDAYS in a spreadsheet. Negative when end is before start.",
			schema:      `{"type":"object","properties":{"start":{"type":"string","format":"date","description":"First date, YYYY-MM-DD."},"end":{"type":"string","format":"date","description":"Last date, YYYY-MM-DD."},` + holidays + `},"required":["start","end"],"additionalProperties":false}`,
			run:         businessDays,
		},
		{
			name:        "add_business_days",
			description: "The date that is a number of working days (Monday to Friday, minus the given holidays) after start, or before it when days is negative, like WORKDAY in a spreadsheet.",
			schema:      `{"type":"object","properties":{"start":{"type":"string","format":"date","description":"Start date, YYYY-MM-DD (not counted)."},"days":{"type":"integer","minimum":-100000,"maximum":100000,"description":"Working days to add; negative goes back."},` + holidays + `},"required":["start","days"],"additionalProperties":false}`,
			run:         addBusinessDays,
		},
	}
	p := &provider{log: log, tools: tools}
	for _, t := range tools {
		var schema map[string]any
		if err := json.Unmarshal([]byte(t.schema), &schema); err != nil {
			panic("toolprovider: bad built-in schema for " + t.name + ": " + err.Error()) // a programming error caught by the tests
		}
		params, err := structpb.NewStruct(schema)
		if err != nil {
			panic("toolprovider: schema for " + t.name + ": " + err.Error())
		}
		p.defs = append(p.defs, &baagentv1.ToolDefinition{
			Schema:           &baagentv1.ToolSchema{Name: t.name, Description: t.description, Parameters: params},
			Version:          "1.0.0",
			ReadOnly:         true,
			CachePolicy:      baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_MEDIUM,
			DefaultTimeoutMs: 5000,
		})
	}
	return p
}

func joinCodes(c []string) string {
	b, _ := json.Marshal(c)
	return string(b)
}

func registerProvider(gs grpc.ServiceRegistrar, p *provider) {
	baagentv1.RegisterToolProviderServiceServer(gs, p)
}

// DescribeTools lists the tools.
func (p *provider) DescribeTools(context.Context, *baagentv1.DescribeToolsRequest) (*baagentv1.DescribeToolsResponse, error) {
	return &baagentv1.DescribeToolsResponse{Tools: p.defs}, nil
}

// ExecuteTool runs one call. A bad request (no tool name) is an RPC error;
// a tool failure, including bad arguments, is a typed ToolError in the
// response so that the toolrunner can show it to the model.
func (p *provider) ExecuteTool(ctx context.Context, req *baagentv1.ExecuteToolRequest) (*baagentv1.ExecuteToolResponse, error) {
	if req.GetToolName() == "" {
		return nil, status.Error(codes.InvalidArgument, "tool_name: required")
	}
	start := time.Now()
	for _, t := range p.tools {
		if t.name != req.GetToolName() {
			continue
		}
		data, terr := t.run(req.GetParameters().AsMap())
		p.log.Info("tool call", "tool", t.name, "tool_call_id", req.GetToolCallId(), "attempt", req.GetAttempt(),
			"ok", terr == nil, "duration_ms", time.Since(start).Milliseconds())
		if terr != nil {
			return errorResponse(terr), nil
		}
		v, err := structpb.NewValue(data)
		if err != nil {
			return errorResponse(&toolError{Kind: "INTERNAL_ERROR", Code: "ENCODING", Message: err.Error()}), nil
		}
		return &baagentv1.ExecuteToolResponse{Outcome: &baagentv1.ExecuteToolResponse_Data{Data: v}}, nil
	}
	return errorResponse(&toolError{Kind: "NOT_FOUND", Code: "UNKNOWN_TOOL", Message: "this provider has no tool " + clip(req.GetToolName())}), nil
}

func errorResponse(e *toolError) *baagentv1.ExecuteToolResponse {
	t := baagentv1.ToolErrorType(baagentv1.ToolErrorType_value["TOOL_ERROR_TYPE_"+e.Kind])
	return &baagentv1.ExecuteToolResponse{Outcome: &baagentv1.ExecuteToolResponse_Error{Error: &baagentv1.ToolError{Type: t, Code: e.Code, Message: e.Message}}}
}
