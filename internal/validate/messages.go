package validate

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Limits of the shared messages. Per-service limits (text sizes, message
// counts) are options of each service; these follow from the contract.
const (
	MaxRunInputBytes        = 1 << 20  // RunSpec.input (contract: at most 1 MiB)
	MaxSystemPromptBytes    = 1 << 20  // RunSpec.system_prompt
	MaxRunSteps             = 500      // RunSpec.max_steps (contract: maximum 500)
	MaxLabels               = 64       // RunSpec.labels entries
	MaxLabelKeyLen          = 128      // label key
	MaxLabelValueBytes      = 256      // label value
	MaxAllowedTools         = 1024     // allowed-tools entries
	MaxTools                = 1024     // tool schemas in one request
	MaxToolDescriptionBytes = 64 << 10 // ToolSchema.description
	MaxToolCalls            = 256      // tool calls in one assistant message
	MaxNameBytes            = 256      // ChatMessage.name and other display names
	MaxStructDepth          = 64       // nesting of a google.protobuf.Struct
	MaxAnswerBytes          = 64 << 10 // RunInput.answer
	MaxSelectedOptions      = 64       // RunInput.selected_options entries
	MaxOptionBytes          = 1 << 10  // one selected option label
	MaxReasonBytes          = 4 << 10  // cancellation reasons
	MaxStateFilters         = 16       // run-state filter entries
)

// Index is the path of element i of a repeated field: Index("messages", 3)
// is `messages[3]`.
func Index(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// Key is the path of a map entry: Key("labels", "team") is `labels["team"]`.
// The key is quoted, so any key is safe in a message.
func Key(field, key string) string {
	return field + "[" + strconv.Quote(key) + "]"
}

// Name checks a free-form name such as ChatMessage.name: 1–256 bytes of
// valid UTF-8 without control characters.
func Name(e *Errors, field, v string) {
	if v == "" {
		e.Add(field, "required")
		return
	}
	if len(v) > MaxNameBytes || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		e.Addf(field, "must be 1-%d bytes of valid UTF-8 without control characters", MaxNameBytes)
	}
}

// ChatMessages checks every message of a repeated ChatMessage field with
// [ChatMessage]. maxBytes bounds each text field of each message.
func ChatMessages(e *Errors, field string, msgs []*baagentv1.ChatMessage, maxBytes int) {
	for i, m := range msgs {
		ChatMessage(e, Index(field, i), m, maxBytes)
	}
}

// ChatMessage checks one chat message:
//   - role is set and known; importance and kind are known;
//   - id and round_id, when given, are [ID]s; name, when given, is a [Name];
//   - content, reasoning_content and tool call arguments are valid UTF-8 of at
//     most maxBytes each;
//   - only assistant messages carry tool_calls, each with an id from the model
//     ([ToolCallID], unique within the message) and a name ([ToolCallName]);
//   - tool messages carry the tool_call_id they answer; no other role does;
//   - created_at, when set, is a valid timestamp.
func ChatMessage(e *Errors, field string, m *baagentv1.ChatMessage, maxBytes int) {
	if m == nil {
		e.Add(field, "required")
		return
	}
	Optional(e, field+".id", m.GetId(), ID)
	role := m.GetRole()
	Enum(e, field+".role", role, baagentv1.Role_name, false)
	Text(e, field+".content", m.GetContent(), maxBytes)
	Optional(e, field+".name", m.GetName(), Name)

	calls := m.GetToolCalls()
	if len(calls) > 0 && role != baagentv1.Role_ROLE_ASSISTANT {
		e.Add(field+".tool_calls", "only assistant messages (ROLE_ASSISTANT) may carry tool calls")
	}
	MaxItems(e, field+".tool_calls", len(calls), MaxToolCalls)
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		cf := Index(field+".tool_calls", i)
		if c == nil {
			e.Add(cf, "required")
			continue
		}
		ToolCallID(e, cf+".id", c.GetId())
		if id := c.GetId(); id != "" {
			if seen[id] {
				e.Add(cf+".id", "duplicate tool call id: ids must be unique within a message")
			}
			seen[id] = true
		}
		ToolCallName(e, cf+".name", c.GetName())
		Text(e, cf+".arguments", c.GetArguments(), maxBytes)
	}

	if role == baagentv1.Role_ROLE_TOOL {
		ToolCallID(e, field+".tool_call_id", m.GetToolCallId())
	} else if m.GetToolCallId() != "" {
		e.Add(field+".tool_call_id", "only tool messages (ROLE_TOOL) carry a tool_call_id")
	}
	Optional(e, field+".tool_name", m.GetToolName(), ToolCallName)
	Text(e, field+".reasoning_content", m.GetReasoningContent(), maxBytes)
	Enum(e, field+".importance", m.GetImportance(), baagentv1.MessageImportance_name, true)
	Optional(e, field+".round_id", m.GetRoundId(), ID)
	Timestamp(e, field+".created_at", m.GetCreatedAt())
	Enum(e, field+".kind", m.GetKind(), baagentv1.MessageKind_name, true)
}

// ToolSchemas checks a repeated ToolSchema field: at most [MaxTools] schemas,
// each valid ([ToolSchema]) and with a name used only once.
func ToolSchemas(e *Errors, field string, tools []*baagentv1.ToolSchema) {
	MaxItems(e, field, len(tools), MaxTools)
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		f := Index(field, i)
		ToolSchema(e, f, t)
		if n := t.GetName(); n != "" {
			if seen[n] {
				e.Add(f+".name", "duplicate tool name: each tool may be listed once")
			}
			seen[n] = true
		}
	}
}

// ToolSchema checks one tool schema: name is a [ToolName], description is
// valid UTF-8 of at most [MaxToolDescriptionBytes], and parameters, when set,
// is a JSON-representable [Struct] whose `type`, if present, is "object".
func ToolSchema(e *Errors, field string, t *baagentv1.ToolSchema) {
	if t == nil {
		e.Add(field, "required")
		return
	}
	ToolName(e, field+".name", t.GetName())
	Text(e, field+".description", t.GetDescription(), MaxToolDescriptionBytes)
	p := t.GetParameters()
	Struct(e, field+".parameters", p)
	if typ, ok := p.GetFields()["type"]; ok {
		if s, isString := typ.GetKind().(*structpb.Value_StringValue); !isString || s.StringValue != "object" {
			e.Add(field+".parameters.type", `must be "object": tool arguments are a JSON object`)
		}
	}
}

// ToolAllowList checks an optional allow list: at most [MaxAllowedTools]
// entries, each a [ToolPattern]. Absent (nil) means no restriction and is
// valid.
func ToolAllowList(e *Errors, field string, l *baagentv1.ToolAllowList) {
	if l == nil {
		return
	}
	AllowedTools(e, field+".names", l.GetNames())
}

// AllowedTools checks a list of tool names or globs: at most
// [MaxAllowedTools] entries, each a [ToolPattern].
func AllowedTools(e *Errors, field string, names []string) {
	MaxItems(e, field, len(names), MaxAllowedTools)
	for i, n := range names {
		ToolPattern(e, Index(field, i), n)
	}
}

// Struct checks that an optional google.protobuf.Struct (tool arguments, a
// JSON Schema) is representable as JSON: keys and strings valid UTF-8, every
// value set, numbers finite, nesting at most [MaxStructDepth]. It reports the
// first problem found, with its path (`parameters.filter["a b"][2]`).
func Struct(e *Errors, field string, s *structpb.Struct) {
	if s == nil {
		return
	}
	if path, problem := checkStruct(field, s, 1); problem != "" {
		e.Add(path, problem)
	}
}

func checkStruct(field string, s *structpb.Struct, depth int) (string, string) {
	if depth > MaxStructDepth {
		return field, "must not nest deeper than " + strconv.Itoa(MaxStructDepth) + " levels"
	}
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic: the same request reports the same path
	for _, k := range keys {
		f := structKey(field, k)
		if !utf8.ValidString(k) {
			return f, "key must be valid UTF-8"
		}
		if path, problem := checkValue(f, s.GetFields()[k], depth); problem != "" {
			return path, problem
		}
	}
	return "", ""
}

func checkValue(field string, v *structpb.Value, depth int) (string, string) {
	switch k := v.GetKind().(type) {
	case nil:
		return field, "must have a value (use null_value for JSON null)"
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return field, "must be a finite number (JSON has no NaN or Infinity)"
		}
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return field, "must be valid UTF-8"
		}
	case *structpb.Value_StructValue:
		return checkStruct(field, k.StructValue, depth+1)
	case *structpb.Value_ListValue:
		if depth+1 > MaxStructDepth {
			return field, "must not nest deeper than " + strconv.Itoa(MaxStructDepth) + " levels"
		}
		for i, item := range k.ListValue.GetValues() {
			if path, problem := checkValue(Index(field, i), item, depth+1); problem != "" {
				return path, problem
			}
		}
	}
	return "", ""
}

// structKey is `field.key` for identifier-like keys, else `field["key"]`.
func structKey(field, k string) string {
	if k != "" && allBytes(k, isTokenByte) {
		return field + "." + k
	}
	return Key(field, k)
}

// RunSpec checks what a client asks for when starting a run (field is the
// path of the spec, usually `spec`): the spec is present; input is required,
// valid UTF-8, at most 1 MiB; conversation_id and project, when given, are
// [ID]s; model, when given, is a [Model]; max_steps is 0 (default 50) to 500;
// system_prompt is valid UTF-8 of at most 1 MiB; allowed_tools entries are
// [ToolPattern]s; idempotency_key, when given, is an [IdempotencyKey]; labels
// pass [Labels].
func RunSpec(e *Errors, field string, s *baagentv1.RunSpec) {
	if s == nil {
		e.Add(field, "required")
		return
	}
	RequiredText(e, field+".input", s.GetInput(), MaxRunInputBytes)
	Optional(e, field+".conversation_id", s.GetConversationId(), ID)
	Optional(e, field+".model", s.GetModel(), Model)
	if n := s.GetMaxSteps(); n < 0 || n > MaxRunSteps {
		e.Addf(field+".max_steps", "must be between 0 and %d (0 uses the default of 50), got %d", MaxRunSteps, n)
	}
	Text(e, field+".system_prompt", s.GetSystemPrompt(), MaxSystemPromptBytes)
	AllowedTools(e, field+".allowed_tools", s.GetAllowedTools())
	Optional(e, field+".project", s.GetProject(), ID)
	Optional(e, field+".idempotency_key", s.GetIdempotencyKey(), IdempotencyKey)
	Labels(e, field+".labels", s.GetLabels())
	if _, ok := baagentv1.PlanMode_name[int32(s.GetPlan())]; !ok {
		e.Addf(field+".plan", "unknown plan mode %d; one of AUTO, ALWAYS, NEVER", s.GetPlan())
	}
	if _, ok := baagentv1.PlanApproval_name[int32(s.GetPlanApproval())]; !ok {
		e.Addf(field+".plan_approval", "unknown plan approval %d; one of ASK, OFF", s.GetPlanApproval())
	}
}

// Labels checks a label map: at most [MaxLabels] entries; keys 1–128
// characters of [A-Za-z0-9._/-]; values valid UTF-8 of at most 256 bytes.
func Labels(e *Errors, field string, labels map[string]string) {
	MaxItems(e, field, len(labels), MaxLabels)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := Key(field, k)
		if k == "" || len(k) > MaxLabelKeyLen || !allBytes(k, func(c byte) bool { return isTokenByte(c) || c == '.' || c == '/' }) {
			e.Addf(f, "key must be 1-%d characters of [A-Za-z0-9._/-]", MaxLabelKeyLen)
		}
		if v := labels[k]; !utf8.ValidString(v) || len(v) > MaxLabelValueBytes {
			e.Addf(f, "value must be valid UTF-8 of at most %d bytes", MaxLabelValueBytes)
		}
	}
}

// RunInput checks an answer to a waiting run (field is usually `input`): it
// is present; input_id is an [ID]; answer is valid UTF-8 of at most 64 KiB;
// selected_options has at most 64 non-blank labels of at most 1 KiB each;
// intervention is known; and at least one of answer, selected_options or
// intervention is given.
func RunInput(e *Errors, field string, in *baagentv1.RunInput) {
	if in == nil {
		e.Add(field, "required")
		return
	}
	ID(e, field+".input_id", in.GetInputId())
	Text(e, field+".answer", in.GetAnswer(), MaxAnswerBytes)
	opts := in.GetSelectedOptions()
	MaxItems(e, field+".selected_options", len(opts), MaxSelectedOptions)
	for i, o := range opts {
		RequiredText(e, Index(field+".selected_options", i), o, MaxOptionBytes)
	}
	Enum(e, field+".intervention", in.GetIntervention(), baagentv1.DoomLoopIntervention_name, true)
	if in.GetAnswer() == "" && len(opts) == 0 && in.GetIntervention() == baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_UNSPECIFIED {
		e.Add(field+".answer", "required: give an answer, selected_options or an intervention")
	}
}

// RunStates checks a run-state filter (ListRuns.states): at most
// [MaxStateFilters] entries, each a known state other than UNSPECIFIED.
func RunStates(e *Errors, field string, states []baagentv1.RunState) {
	MaxItems(e, field, len(states), MaxStateFilters)
	for i, st := range states {
		Enum(e, Index(field, i), st, baagentv1.RunState_name, false)
	}
}
