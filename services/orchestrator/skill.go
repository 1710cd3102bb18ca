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
// and ends its scope (docs/concepts/skills.md: skills are reached via a
// meta-tool, not called as tools).
const SkillToolName = "skill"

// SkillReadToolName is the tool through which the model reads an active
// skill's resource files (level 3).
const SkillReadToolName = "skill_read"

// skillArgNames are the argument names accepted for the skill's name: `name`
// is the schema's; the others are what models commonly write instead.
var skillArgNames = []string{"name", "skill", "skill_name", "command"}

// Actions of the skill meta-tool.
const (
	skillActionActivate = "activate"
	skillActionEnd      = "end"
)

// skillToolSchema describes the meta-tool to the model.
func skillToolSchema() *baagentv1.ToolSchema {
	params, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{
				"type":        "string",
				"description": "Name of the skill, exactly as listed in the skills catalog.",
			},
			"action": map[string]any{
				"type":        "string",
				"enum":        []any{skillActionActivate, skillActionEnd},
				"description": "activate (default) loads the skill; end says you are done with an active skill, which ends it and the skills nested in it.",
			},
		},
		"required":             []any{"name"},
		"additionalProperties": false,
	})
	return &baagentv1.ToolSchema{
		Name: SkillToolName,
		Description: "Activate a skill from the skills catalog in the system prompt, or end an active one. Activation loads the " +
			"skill's full instructions into the conversation and may restrict the tools available " +
			"while the skill is active. Activate a skill before doing the task it describes; end it " +
			"({\"name\": ..., \"action\": \"end\"}) when its part of the task is done, which lifts its restrictions.",
		Parameters: params,
	}
}

// skillReadToolSchema describes skill_read to the model.
func skillReadToolSchema() *baagentv1.ToolSchema {
	params, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path": map[string]any{
				"type":        "string",
				"description": "Path of the file inside the skill's folder, as its instructions name it (references/guide.md).",
			},
			"skill": map[string]any{
				"type":        "string",
				"description": "Active skill whose folder to read; default: the innermost active skill.",
			},
			"offset": map[string]any{
				"type":        "integer",
				"minimum":     0,
				"description": "0-based line to start reading at (default 0)",
			},
		},
		"required":             []any{"path"},
		"additionalProperties": false,
	})
	return &baagentv1.ToolSchema{
		Name: SkillReadToolName,
		Description: "Read a text file from an active skill's folder (the references, scripts or assets its " +
			"instructions point to). Returns numbered lines (cat -n style); long files are paged: offset is the 0-based " +
			"line to start at. Lines longer than 2000 characters are cut and a page stops at 2000 lines or 50 KiB, " +
			"with a hint telling how to read further.",
		Parameters: params,
	}
}

// skillArgs are the meta-tool's arguments.
type skillArgs struct {
	name, action string
}

// parseSkillArgs returns the skill name and action from the meta-tool's
// arguments.
func parseSkillArgs(args string) (skillArgs, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return skillArgs{}, fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	var a skillArgs
	for _, k := range skillArgNames {
		if v, ok := m[k].(string); ok && strings.TrimSpace(v) != "" {
			a.name = strings.TrimSpace(v)
			break
		}
	}
	if a.name == "" {
		return skillArgs{}, errors.New(`missing the skill name: call skill with {"name": "<skill from the catalog>"}`)
	}
	a.action = skillActionActivate
	switch v := m["action"].(type) {
	case nil:
	case string:
		switch act := strings.ToLower(strings.TrimSpace(v)); act {
		case "", skillActionActivate:
		case skillActionEnd, "done", "finish", "deactivate":
			a.action = skillActionEnd
		default:
			return skillArgs{}, fmt.Errorf(`unknown action %q: use "activate" or "end"`, v)
		}
	default:
		return skillArgs{}, errors.New(`action must be a string: "activate" or "end"`)
	}
	return a, nil
}

// skillReadArgs are skill_read's arguments.
type skillReadArgs struct {
	path, skill string
	offset      int64
}

// parseSkillReadArgs validates skill_read's arguments.
func parseSkillReadArgs(args string) (skillReadArgs, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return skillReadArgs{}, fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	var a skillReadArgs
	p, _ := m["path"].(string)
	if a.path = strings.TrimSpace(p); a.path == "" {
		return skillReadArgs{}, errors.New(`missing the path: call skill_read with {"path": "<file the skill's instructions name>"}`)
	}
	switch v := m["skill"].(type) {
	case nil:
	case string:
		a.skill = strings.TrimSpace(v)
	default:
		return skillReadArgs{}, errors.New("skill must be a string: the name of an active skill")
	}
	switch v := m["offset"].(type) {
	case nil:
	case float64:
		if v < 0 || v != float64(int64(v)) || v > 1<<53 {
			return skillReadArgs{}, fmt.Errorf("offset must be a whole line number ≥ 0, got %v", v)
		}
		a.offset = int64(v)
	default:
		return skillReadArgs{}, errors.New("offset must be a number: the 0-based line to start reading at")
	}
	return a, nil
}
