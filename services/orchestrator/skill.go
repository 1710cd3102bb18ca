package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// SkillToolName is the meta-tool through which the model activates a skill
// (see docs/concepts/skills.md#activation: skills are reached via a
// meta-tool, not called as tools).
const SkillToolName = "skill"

// skillArgNames are the argument names accepted for the skill's name: `name`
// is the schema's; the others are what models commonly write instead.
var skillArgNames = []string{"name", "skill", "skill_name", "command"}

// skillToolSchema describes the meta-tool to the model.
func skillToolSchema() *baagentv1.ToolSchema {
	params, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{
				"type":        "string",
				"description": "Name of the skill to activate, exactly as listed in the skills catalog.",
			},
		},
		"required":             []any{"name"},
		"additionalProperties": false,
	})
	return &baagentv1.ToolSchema{
		Name: SkillToolName,
		Description: "Activate a skill from the skills catalog in the system prompt. Activation loads the " +
			"skill's full instructions into the conversation and may restrict the tools available " +
			"while the skill is active. Activate a skill before doing the task it describes.",
		Parameters: params,
	}
}

// parseSkillArgs returns the skill name from the meta-tool's arguments.
func parseSkillArgs(args string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return "", fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	for _, k := range skillArgNames {
		if v, ok := m[k].(string); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New(`missing the skill name: call skill with {"name": "<skill from the catalog>"}`)
}

// activation is one skill on the run's activation stack.
type activation struct {
	name, id string
	modifier *baagentv1.ContextModifier
}

// skillStack is the run's activation stack. A
// skill stays active, with its context modifier applied, until the run's
// round ends with a final answer; a skill activated while others are active
// is nested in them and carries the chain. Owned by the run's loop
// goroutine.
type skillStack struct {
	frames []activation
}

func (s *skillStack) chain() []string {
	out := make([]string, len(s.frames))
	for i, f := range s.frames {
		out[i] = f.name
	}
	return out
}

func (s *skillStack) push(a activation) { s.frames = append(s.frames, a) }

// model is the innermost active skill's model, else def.
func (s *skillStack) model(def string) string {
	for i := len(s.frames) - 1; i >= 0; i-- {
		if m := s.frames[i].modifier.GetModel(); m != "" {
			return m
		}
	}
	return def
}

// callerID is who makes tool calls: the innermost active skill, else the agent.
func (s *skillStack) callerID() string {
	if n := len(s.frames); n > 0 {
		return "skill:" + s.frames[n-1].name
	}
	return "agent"
}

// allowLists returns the allow lists in force, outermost first: the run's
// own (when the spec restricts tools) and each active skill's. A tool must
// pass every list, so a nested skill can narrow the tools but never widen
// them.
func (s *skillStack) allowLists(spec []string) []*baagentv1.ToolAllowList {
	var lists []*baagentv1.ToolAllowList
	if len(spec) > 0 {
		lists = append(lists, &baagentv1.ToolAllowList{Names: spec})
	}
	for _, f := range s.frames {
		if l := f.modifier.GetAllowedTools(); l != nil {
			lists = append(lists, l)
		}
	}
	return lists
}
