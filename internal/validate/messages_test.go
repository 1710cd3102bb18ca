package validate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// with returns a copy of valid changed by mutate.
func with[M proto.Message](valid M, mutate func(M)) M {
	m := proto.Clone(valid).(M)
	mutate(m)
	return m
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChatMessage(t *testing.T) {
	t.Parallel()

	const max = 16
	type msg = baagentv1.ChatMessage
	type call = baagentv1.ToolCall
	user := &msg{
		Id: "m-1", Role: baagentv1.Role_ROLE_USER, Content: rep("u", max), Name: "alice",
		Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_CRITICAL, RoundId: "round-1",
		CreatedAt: timestamppb.Now(),
	}
	assistant := &msg{
		Role: baagentv1.Role_ROLE_ASSISTANT, ReasoningContent: rep("r", max),
		ToolCalls: []*call{{Id: "call_1", Name: "sql_query", Arguments: `{"q":"select 1"}`}, {Id: "call_2", Name: "Read File", Arguments: ""}},
	}
	tool := &msg{Role: baagentv1.Role_ROLE_TOOL, Content: "ok", ToolCallId: "call_1", ToolName: "sql_query", IsError: true}
	m := func(base *msg, f func(*msg)) func(*Errors) {
		return func(e *Errors) { ChatMessage(e, "m", with(base, f), max) }
	}
	ok := func(base *msg) func(*Errors) { return func(e *Errors) { ChatMessage(e, "m", base, max) } }
	calls := func(n int) []*call {
		out := make([]*call, n)
		for i := range out {
			out[i] = &call{Id: fmt.Sprintf("call_%d", i), Name: "glob"}
		}
		return out
	}

	runCases(t, []ruleCase{
		{name: "user", run: ok(user)},
		{name: "assistant with tool calls", run: ok(assistant)},
		{name: "tool", run: ok(tool)},
		{name: "minimal system", run: ok(&msg{Role: baagentv1.Role_ROLE_SYSTEM})},
		{name: "skill instruction", run: m(user, func(m *msg) { m.Kind = baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION })},
		{name: "max tool calls", run: m(assistant, func(m *msg) { m.ToolCalls = calls(MaxToolCalls) })},
		{name: "nil", run: func(e *Errors) { ChatMessage(e, "m", nil, max) }, field: "m", desc: "required"},
		{name: "no role", run: m(user, func(m *msg) { m.Role = 0 }), field: "m.role", desc: "required: must be one of ROLE_SYSTEM"},
		{name: "unknown role", run: m(user, func(m *msg) { m.Role = 5 }), field: "m.role", desc: "unknown value 5"},
		{name: "bad id", run: m(user, func(m *msg) { m.Id = "../m" }), field: "m.id", desc: "[A-Za-z0-9._:-]"},
		{name: "content one byte over", run: m(user, func(m *msg) { m.Content += "u" }), field: "m.content", desc: "must be at most 16 bytes, got 17"},
		{name: "content not UTF-8", run: m(user, func(m *msg) { m.Content = "\xff" }), field: "m.content", desc: badUTF8},
		{name: "name with newline", run: m(user, func(m *msg) { m.Name = "a\nb" }), field: "m.name", desc: "without control characters"},
		{name: "user with tool calls", run: m(user, func(m *msg) { m.ToolCalls = calls(1) }), field: "m.tool_calls", desc: "only assistant messages (ROLE_ASSISTANT) may carry tool calls"},
		{name: "too many tool calls", run: m(assistant, func(m *msg) { m.ToolCalls = calls(MaxToolCalls + 1) }), field: "m.tool_calls", desc: "must have at most 256 items, got 257"},
		{name: "nil tool call", run: m(assistant, func(m *msg) { m.ToolCalls[1] = nil }), field: "m.tool_calls[1]", desc: "required"},
		{name: "tool call without id", run: m(assistant, func(m *msg) { m.ToolCalls[0].Id = "" }), field: "m.tool_calls[0].id", desc: "required"},
		{name: "tool call id with space", run: m(assistant, func(m *msg) { m.ToolCalls[0].Id = "call 1" }), field: "m.tool_calls[0].id", desc: "without whitespace"},
		{name: "duplicate tool call id", run: m(assistant, func(m *msg) { m.ToolCalls[1].Id = "call_1" }), field: "m.tool_calls[1].id", desc: "duplicate tool call id"},
		{name: "tool call without name", run: m(assistant, func(m *msg) { m.ToolCalls[1].Name = "" }), field: "m.tool_calls[1].name", desc: "required"},
		{name: "tool call name with control", run: m(assistant, func(m *msg) { m.ToolCalls[1].Name = "a\x1b" }), field: "m.tool_calls[1].name", desc: "control"},
		{name: "arguments at limit", run: m(assistant, func(m *msg) { m.ToolCalls[0].Arguments = rep("a", max) })},
		{name: "arguments one byte over", run: m(assistant, func(m *msg) { m.ToolCalls[0].Arguments = rep("a", max+1) }), field: "m.tool_calls[0].arguments", desc: "at most 16 bytes"},
		{name: "arguments not UTF-8", run: m(assistant, func(m *msg) { m.ToolCalls[0].Arguments = "{\xc3}" }), field: "m.tool_calls[0].arguments", desc: badUTF8},
		{name: "reasoning one byte over", run: m(assistant, func(m *msg) { m.ReasoningContent += "é" }), field: "m.reasoning_content", desc: "got 18"},
		{name: "tool without tool_call_id", run: m(tool, func(m *msg) { m.ToolCallId = "" }), field: "m.tool_call_id", desc: "required"},
		{name: "tool_call_id with newline", run: m(tool, func(m *msg) { m.ToolCallId = "call\n1" }), field: "m.tool_call_id", desc: "without whitespace"},
		{name: "tool_call_id too long", run: m(tool, func(m *msg) { m.ToolCallId = rep("c", MaxToolCallIDLen+1) }), field: "m.tool_call_id", desc: "1-256 bytes"},
		{name: "user with tool_call_id", run: m(user, func(m *msg) { m.ToolCallId = "call_1" }), field: "m.tool_call_id", desc: "only tool messages (ROLE_TOOL) carry a tool_call_id"},
		{name: "assistant with tool_call_id", run: m(assistant, func(m *msg) { m.ToolCallId = "call_1" }), field: "m.tool_call_id", desc: "only tool messages"},
		{name: "tool with tool calls", run: m(tool, func(m *msg) { m.ToolCalls = calls(1) }), field: "m.tool_calls", desc: "only assistant messages"},
		{name: "tool_name with control", run: m(tool, func(m *msg) { m.ToolName = "\x00" }), field: "m.tool_name", desc: "control"},
		{name: "unknown importance", run: m(user, func(m *msg) { m.Importance = 5 }), field: "m.importance", desc: "unknown value 5"},
		{name: "bad round_id", run: m(user, func(m *msg) { m.RoundId = ".r" }), field: "m.round_id", desc: "not starting with '.'"},
		{name: "bad created_at", run: m(user, func(m *msg) { m.CreatedAt = &timestamppb.Timestamp{Seconds: math.MaxInt64} }), field: "m.created_at", desc: "valid timestamp"},
		{name: "unknown kind", run: m(user, func(m *msg) { m.Kind = -3 }), field: "m.kind", desc: "unknown value -3"},
	})

	t.Run("every bad field named", func(t *testing.T) {
		var e Errors
		ChatMessage(&e, "m", &msg{
			Id: ".", Content: "\xff", Name: "\n", ToolCalls: []*call{{}, nil}, ToolCallId: "x",
			ToolName: "\x00", ReasoningContent: "\xfe", Importance: 9, RoundId: "a b",
			CreatedAt: &timestamppb.Timestamp{Nanos: -1}, Kind: 9,
		}, max)
		want := []string{"m.id", "m.role", "m.content", "m.name", "m.tool_calls", "m.tool_calls[0].id",
			"m.tool_calls[0].name", "m.tool_calls[1]", "m.tool_call_id", "m.tool_name", "m.reasoning_content",
			"m.importance", "m.round_id", "m.created_at", "m.kind"}
		var got []string
		for _, v := range e.Violations() {
			got = append(got, v.GetField())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("fields\n got %q\nwant %q", got, want)
		}
	})
}

func TestChatMessages(t *testing.T) {
	t.Parallel()

	msgs := []*baagentv1.ChatMessage{
		{Role: baagentv1.Role_ROLE_USER},
		{Role: baagentv1.Role_ROLE_ASSISTANT, Content: "abc"},
		nil,
		{},
	}
	var e Errors
	ChatMessages(&e, "history", msgs, 2)
	want := []string{"history[1].content", "history[2]", "history[3].role"}
	if e.Len() != len(want) {
		t.Fatalf("got %d violations, want %d: %v", e.Len(), len(want), e.Err())
	}
	for i, v := range e.Violations() {
		if v.GetField() != want[i] {
			t.Errorf("violation %d on %q, want %q", i, v.GetField(), want[i])
		}
	}
	runCases(t, []ruleCase{
		{name: "empty", run: func(e *Errors) { ChatMessages(e, "history", nil, 0) }},
		{name: "valid", run: func(e *Errors) { ChatMessages(e, "history", msgs[:1], 0) }},
	})
}

func TestToolSchema(t *testing.T) {
	t.Parallel()

	type schema = baagentv1.ToolSchema
	valid := &schema{Name: "sql_query", Description: rep("d", MaxToolDescriptionBytes), Parameters: mustStruct(t, map[string]any{
		"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}, "required": []any{"query"},
	})}
	s := func(f func(*schema)) func(*Errors) {
		return func(e *Errors) { ToolSchema(e, "tool", with(valid, f)) }
	}
	runCases(t, []ruleCase{
		{name: "valid", run: s(func(*schema) {})},
		{name: "no parameters", run: s(func(t *schema) { t.Parameters = nil })},
		{name: "parameters without type", run: s(func(t *schema) { delete(t.Parameters.Fields, "type") })},
		{name: "nil", run: func(e *Errors) { ToolSchema(e, "tool", nil) }, field: "tool", desc: "required"},
		{name: "no name", run: s(func(t *schema) { t.Name = "" }), field: "tool.name", desc: "required"},
		{name: "name with dot", run: s(func(t *schema) { t.Name = "sql.query" }), field: "tool.name", desc: "[A-Za-z0-9_-]"},
		{name: "description one byte over", run: s(func(t *schema) { t.Description += "d" }), field: "tool.description", desc: "must be at most 65536 bytes, got 65537"},
		{name: "description not UTF-8", run: s(func(t *schema) { t.Description = "\xff" }), field: "tool.description", desc: badUTF8},
		{name: "type array", run: s(func(t *schema) { t.Parameters.Fields["type"] = structpb.NewStringValue("array") }), field: "tool.parameters.type", desc: `must be "object"`},
		{name: "type not a string", run: s(func(t *schema) { t.Parameters.Fields["type"] = structpb.NewBoolValue(true) }), field: "tool.parameters.type", desc: `must be "object"`},
		{name: "type list", run: s(func(t *schema) {
			t.Parameters.Fields["type"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("object")}})
		}), field: "tool.parameters.type", desc: `must be "object"`},
		{name: "NaN in schema", run: s(func(t *schema) {
			t.Parameters.Fields["properties"].GetStructValue().Fields["query"].GetStructValue().Fields["maxLength"] = structpb.NewNumberValue(math.NaN())
		}), field: "tool.parameters.properties.query.maxLength", desc: "finite number"},
	})
}

func TestToolSchemas(t *testing.T) {
	t.Parallel()

	tools := func(n int) []*baagentv1.ToolSchema {
		out := make([]*baagentv1.ToolSchema, n)
		for i := range out {
			out[i] = &baagentv1.ToolSchema{Name: fmt.Sprintf("tool_%d", i)}
		}
		return out
	}
	dup := tools(3)
	dup[2].Name = "tool_0"
	runCases(t, []ruleCase{
		{name: "none", run: func(e *Errors) { ToolSchemas(e, "tools", nil) }},
		{name: "max", run: func(e *Errors) { ToolSchemas(e, "tools", tools(MaxTools)) }},
		{name: "max+1", run: func(e *Errors) { ToolSchemas(e, "tools", tools(MaxTools+1)) }, field: "tools", desc: "must have at most 1024 items, got 1025"},
		{name: "duplicate", run: func(e *Errors) { ToolSchemas(e, "tools", dup) }, field: "tools[2].name", desc: "duplicate tool name"},
		{name: "nil element", run: func(e *Errors) { ToolSchemas(e, "tools", []*baagentv1.ToolSchema{tools(1)[0], nil}) }, field: "tools[1]", desc: "required"},
	})
	t.Run("empty names are not duplicates", func(t *testing.T) {
		var e Errors
		ToolSchemas(&e, "tools", []*baagentv1.ToolSchema{{}, {}})
		if e.Len() != 2 || e.Violations()[0].GetField() != "tools[0].name" || e.Violations()[1].GetField() != "tools[1].name" ||
			e.Violations()[1].GetDescription() != "required" {
			t.Fatalf("got %v", e.Err())
		}
	})
}

func TestToolAllowList(t *testing.T) {
	t.Parallel()

	names := func(n int) []string { return strings.Fields(rep("t_* ", n)) }
	runCases(t, []ruleCase{
		{name: "absent", run: func(e *Errors) { ToolAllowList(e, "allowed", nil) }},
		{name: "empty (no tools)", run: func(e *Errors) { ToolAllowList(e, "allowed", &baagentv1.ToolAllowList{}) }},
		{name: "max", run: func(e *Errors) { ToolAllowList(e, "allowed", &baagentv1.ToolAllowList{Names: names(MaxAllowedTools)}) }},
		{name: "max+1", run: func(e *Errors) {
			ToolAllowList(e, "allowed", &baagentv1.ToolAllowList{Names: names(MaxAllowedTools + 1)})
		}, field: "allowed.names", desc: "at most 1024 items, got 1025"},
		{name: "bad entry", run: func(e *Errors) {
			ToolAllowList(e, "allowed", &baagentv1.ToolAllowList{Names: []string{"file_read", "mcp__x__*", "a/b"}})
		}, field: "allowed.names[2]", desc: "tool name or glob"},
		{name: "AllowedTools empty entry", run: func(e *Errors) { AllowedTools(e, "spec.allowed_tools", []string{""}) }, field: "spec.allowed_tools[0]", desc: "required"},
	})
}

// nested returns a Struct of depth levels: `{"k": {"k": … {}}}`.
func nested(depth int) *structpb.Struct {
	s := &structpb.Struct{}
	for range depth - 1 {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStructValue(s)}}
	}
	return s
}

// nestedLists returns a Struct holding lists nested so that the whole value
// has depth levels: `{"l": [[…[]…]]}`.
func nestedLists(depth int) *structpb.Struct {
	v := structpb.NewListValue(&structpb.ListValue{})
	for range depth - 2 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{"l": v}}
}

func TestStruct(t *testing.T) {
	t.Parallel()

	const nanDesc = "must be a finite number (JSON has no NaN or Infinity)"
	depthDesc := fmt.Sprintf("must not nest deeper than %d levels", MaxStructDepth)
	fields := func(kv ...any) *structpb.Struct {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for i := 0; i < len(kv); i += 2 {
			s.Fields[kv[i].(string)] = kv[i+1].(*structpb.Value)
		}
		return s
	}
	list := func(vs ...*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	st := func(s *structpb.Struct) func(*Errors) { return func(e *Errors) { Struct(e, "p", s) } }
	keys := rep(".k", MaxStructDepth) // the path of the level-65 object
	runCases(t, []ruleCase{
		{name: "nil", run: st(nil)},
		{name: "empty", run: st(&structpb.Struct{})},
		{name: "JSON values", run: st(mustStruct(t, map[string]any{
			"s": "é", "n": -1.5e300, "b": false, "null": nil, "l": []any{1, "a", nil, []any{}, map[string]any{}}, "o": map[string]any{"x": 1},
		}))},
		{name: "odd keys", run: st(fields("", structpb.NewNullValue(), "a b", structpb.NewNullValue(), "é", structpb.NewNullValue()))},
		{name: "depth at max", run: st(nested(MaxStructDepth))},
		{name: "depth max+1", run: st(nested(MaxStructDepth + 1)), field: "p" + keys, desc: depthDesc},
		{name: "very deep reports the first level too deep", run: st(nested(10 * MaxStructDepth)), field: "p" + keys, desc: depthDesc},
		{name: "lists at max", run: st(nestedLists(MaxStructDepth))},
		{name: "lists max+1", run: st(nestedLists(MaxStructDepth + 1)), field: "p.l" + rep("[0]", MaxStructDepth-1), desc: depthDesc},
		{name: "NaN", run: st(fields("x", structpb.NewNumberValue(math.NaN()))), field: "p.x", desc: nanDesc},
		{name: "+Inf in list", run: st(fields("xs", list(structpb.NewNumberValue(1), structpb.NewNumberValue(math.Inf(1))))), field: "p.xs[1]", desc: nanDesc},
		{name: "-Inf in nested object", run: st(fields("o", structpb.NewStructValue(fields("a b", structpb.NewNumberValue(math.Inf(-1)))))), field: `p.o["a b"]`, desc: nanDesc},
		{name: "string not UTF-8", run: st(fields("s", structpb.NewStringValue("\xff"))), field: "p.s", desc: badUTF8},
		{name: "key not UTF-8", run: st(fields("\xff", structpb.NewNullValue())), field: `p["\xff"]`, desc: "key must be valid UTF-8"},
		{name: "value without kind", run: st(fields("v", &structpb.Value{})), field: "p.v", desc: "must have a value (use null_value for JSON null)"},
		{name: "nil value", run: st(fields("v", (*structpb.Value)(nil))), field: "p.v", desc: "must have a value"},
		{name: "list item without kind", run: st(fields("v", list(&structpb.Value{}))), field: "p.v[0]", desc: "must have a value"},
		{name: "first problem in key order", run: st(fields(
			"b", structpb.NewNumberValue(math.NaN()), "a", &structpb.Value{}, "c", structpb.NewStringValue("\xff"),
		)), field: "p.a", desc: "must have a value"},
	})
	t.Run("deterministic", func(t *testing.T) {
		s := fields("z", structpb.NewNumberValue(math.NaN()), "y", structpb.NewNumberValue(math.NaN()), "x", structpb.NewNumberValue(math.NaN()))
		for range 20 {
			var e Errors
			Struct(&e, "p", s)
			expectOne(t, &e, "p.x", nanDesc)
		}
	})
}

func TestRunSpec(t *testing.T) {
	t.Parallel()

	type spec = baagentv1.RunSpec
	valid := &spec{
		Input: "Analyse Q3 sales", ConversationId: "conv-1", Model: "gpt-4o", MaxSteps: MaxRunSteps,
		SystemPrompt: "You are an analyst.", AllowedTools: []string{"sql_query", "file_*"}, Project: "p-1",
		IdempotencyKey: "k-1", Labels: map[string]string{"team": "finance", "app.kubernetes.io/name": "ba"},
	}
	s := func(f func(*spec)) func(*Errors) { return func(e *Errors) { RunSpec(e, "spec", with(valid, f)) } }
	runCases(t, []ruleCase{
		{name: "valid", run: s(func(*spec) {})},
		{name: "minimal", run: func(e *Errors) { RunSpec(e, "spec", &spec{Input: "hi"}) }},
		{name: "input at limit", run: s(func(s *spec) { s.Input = rep("i", MaxRunInputBytes) })},
		{name: "nil", run: func(e *Errors) { RunSpec(e, "spec", nil) }, field: "spec", desc: "required"},
		{name: "no input", run: s(func(s *spec) { s.Input = "" }), field: "spec.input", desc: "required"},
		{name: "blank input", run: s(func(s *spec) { s.Input = " \n " }), field: "spec.input", desc: "must not be blank"},
		{name: "input one byte over", run: s(func(s *spec) { s.Input = rep("i", MaxRunInputBytes+1) }), field: "spec.input", desc: "must be at most 1048576 bytes, got 1048577"},
		{name: "input not UTF-8", run: s(func(s *spec) { s.Input = "a\xff" }), field: "spec.input", desc: badUTF8},
		{name: "bad conversation_id", run: s(func(s *spec) { s.ConversationId = "a b" }), field: "spec.conversation_id", desc: "[A-Za-z0-9._:-]"},
		{name: "bad model", run: s(func(s *spec) { s.Model = "gpt 4" }), field: "spec.model", desc: "printable ASCII"},
		{name: "max_steps default", run: s(func(s *spec) { s.MaxSteps = 0 })},
		{name: "max_steps over", run: s(func(s *spec) { s.MaxSteps = MaxRunSteps + 1 }), field: "spec.max_steps", desc: "must be between 0 and 500 (0 uses the default of 50), got 501"},
		{name: "max_steps negative", run: s(func(s *spec) { s.MaxSteps = -1 }), field: "spec.max_steps", desc: "got -1"},
		{name: "plan always", run: s(func(s *spec) {
			s.Plan = baagentv1.PlanMode_PLAN_MODE_ALWAYS
			s.PlanApproval = baagentv1.PlanApproval_PLAN_APPROVAL_ASK
		})},
		{name: "plan unknown", run: s(func(s *spec) { s.Plan = 9 }), field: "spec.plan", desc: "unknown plan mode 9"},
		{name: "plan approval unknown", run: s(func(s *spec) { s.PlanApproval = 7 }), field: "spec.plan_approval", desc: "unknown plan approval 7"},
		{name: "system_prompt over", run: s(func(s *spec) { s.SystemPrompt = rep("s", MaxSystemPromptBytes+1) }), field: "spec.system_prompt", desc: "at most 1048576 bytes"},
		{name: "bad allowed tool", run: s(func(s *spec) { s.AllowedTools[1] = "file.*" }), field: "spec.allowed_tools[1]", desc: "tool name or glob"},
		{name: "bad project", run: s(func(s *spec) { s.Project = ".p" }), field: "spec.project", desc: "not starting with '.'"},
		{name: "bad idempotency_key", run: s(func(s *spec) { s.IdempotencyKey = "k 1" }), field: "spec.idempotency_key", desc: "without whitespace"},
		{name: "bad label", run: s(func(s *spec) { s.Labels["a b"] = "x" }), field: `spec.labels["a b"]`, desc: "key must be"},
	})
}

func TestLabels(t *testing.T) {
	t.Parallel()

	l := func(m map[string]string) func(*Errors) { return func(e *Errors) { Labels(e, "labels", m) } }
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprint("k", i)] = "v"
		}
		return m
	}
	const keyDesc = "key must be 1-128 characters of [A-Za-z0-9._/-]"
	const valDesc = "value must be valid UTF-8 of at most 256 bytes"
	runCases(t, []ruleCase{
		{name: "nil", run: l(nil)},
		{name: "valid", run: l(map[string]string{"team": "finance", "app.kubernetes.io/name": "", "k": rep("é", MaxLabelValueBytes/2)})},
		{name: "max entries", run: l(many(MaxLabels))},
		{name: "max+1 entries", run: l(many(MaxLabels + 1)), field: "labels", desc: "must have at most 64 items, got 65"},
		{name: "key at limit", run: l(map[string]string{rep("k", MaxLabelKeyLen): "v"})},
		{name: "key over", run: l(map[string]string{rep("k", MaxLabelKeyLen+1): "v"}), field: Key("labels", rep("k", MaxLabelKeyLen+1)), desc: keyDesc},
		{name: "empty key", run: l(map[string]string{"": "v"}), field: `labels[""]`, desc: keyDesc},
		{name: "key with colon", run: l(map[string]string{"a:b": "v"}), field: `labels["a:b"]`, desc: keyDesc},
		{name: "value over", run: l(map[string]string{"k": rep("v", MaxLabelValueBytes+1)}), field: `labels["k"]`, desc: valDesc},
		{name: "value not UTF-8", run: l(map[string]string{"k": "\xff"}), field: `labels["k"]`, desc: valDesc},
	})
	t.Run("sorted and both problems of one entry", func(t *testing.T) {
		var e Errors
		Labels(&e, "labels", map[string]string{"z z": "\xff", "a a": "ok"})
		got := ""
		for _, v := range e.Violations() {
			got += v.GetField() + ": " + v.GetDescription() + "\n"
		}
		want := `labels["a a"]: ` + keyDesc + "\n" + `labels["z z"]: ` + keyDesc + "\n" + `labels["z z"]: ` + valDesc + "\n"
		if got != want {
			t.Errorf("got\n%swant\n%s", got, want)
		}
	})
}

func TestRunInput(t *testing.T) {
	t.Parallel()

	type input = baagentv1.RunInput
	stop := baagentv1.DoomLoopIntervention(1)
	in := func(i *input) func(*Errors) { return func(e *Errors) { RunInput(e, "input", i) } }
	opts := func(n int) []string { return strings.Fields(rep("o ", n)) }
	runCases(t, []ruleCase{
		{name: "answer", run: in(&input{InputId: "q-1", Answer: rep("a", MaxAnswerBytes)})},
		{name: "options", run: in(&input{InputId: "q-1", SelectedOptions: opts(MaxSelectedOptions)})},
		{name: "intervention", run: in(&input{InputId: "q-1", Intervention: stop})},
		{name: "nil", run: in(nil), field: "input", desc: "required"},
		{name: "no input_id", run: in(&input{Answer: "yes"}), field: "input.input_id", desc: "required"},
		{name: "nothing given", run: in(&input{InputId: "q-1"}), field: "input.answer", desc: "required: give an answer, selected_options or an intervention"},
		{name: "answer over", run: in(&input{InputId: "q-1", Answer: rep("a", MaxAnswerBytes+1)}), field: "input.answer", desc: "at most 65536 bytes"},
		{name: "too many options", run: in(&input{InputId: "q-1", SelectedOptions: opts(MaxSelectedOptions + 1)}), field: "input.selected_options", desc: "at most 64 items, got 65"},
		{name: "blank option", run: in(&input{InputId: "q-1", SelectedOptions: []string{"a", " "}}), field: "input.selected_options[1]", desc: "must not be blank"},
		{name: "option over", run: in(&input{InputId: "q-1", SelectedOptions: []string{rep("o", MaxOptionBytes+1)}}), field: "input.selected_options[0]", desc: "at most 1024 bytes"},
		{name: "unknown intervention", run: in(&input{InputId: "q-1", Answer: "x", Intervention: 99}), field: "input.intervention", desc: "unknown value 99"},
	})
}

func TestRunStates(t *testing.T) {
	t.Parallel()

	s := func(states ...baagentv1.RunState) func(*Errors) {
		return func(e *Errors) { RunStates(e, "states", states) }
	}
	many := make([]baagentv1.RunState, MaxStateFilters+1)
	for i := range many {
		many[i] = 1
	}
	runCases(t, []ruleCase{
		{name: "none", run: s()},
		{name: "known", run: s(1, 2)},
		{name: "max", run: s(many[:MaxStateFilters]...)},
		{name: "max+1", run: s(many...), field: "states", desc: "at most 16 items, got 17"},
		{name: "unspecified", run: s(1, 0), field: "states[1]", desc: "required: must be one of"},
		{name: "unknown", run: s(99), field: "states[0]", desc: "unknown value 99"},
	})
}
