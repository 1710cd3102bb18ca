package orchestrator

import (
	"time"

	"github.com/baagent/baagent/services/orchestrator/internal/subagent"
)

// Sub-agents (docs/concepts/runs.md): specialised
// agents with their own system prompt, tools, skills, model and step limit,
// defined in YAML files (internal/subagent). The model delegates to one
// through the built-in `task` tool; the delegation runs as a child run of
// its own (see subagent_task.go).

// Sub-agent defaults of the Options.
const (
	// DefaultSubAgentMaxDepth: only top-level runs delegate.
	DefaultSubAgentMaxDepth = 1
	// MaxSubAgentDepth bounds the subagent-max-depth setting.
	MaxSubAgentDepth = 4
	// DefaultSubAgentTimeout bounds a `task` call's wait for its child.
	DefaultSubAgentTimeout = 30 * time.Minute
	// DefaultSubAgentIterations is the step limit of a definition that
	// sets no max_iterations.
	DefaultSubAgentIterations = subagent.DefaultIterations
)

// SubAgent is one sub-agent definition.
type SubAgent = subagent.Definition

// ParseSubAgent decodes and validates one definition file's content. name,
// when not empty, is the file's base name the definition's name must equal.
func ParseSubAgent(data []byte, name string) (*SubAgent, error) { return subagent.Parse(data, name) }

// LoadSubAgents loads every definition file (*.yaml, *.yml) of dir, the
// format of Options.SubAgentsDir.
func LoadSubAgents(dir string) ([]*SubAgent, error) { return subagent.Load(dir) }
