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
// (docs/concepts/skills.md: skills are reached via a meta-tool, not called
// as tools).
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
