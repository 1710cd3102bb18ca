// Package subagent loads the sub-agent definitions a run may delegate to
// through the `task` tool.
package subagent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/baagent/baagent/internal/validate"
)

// Sub-agents: specialised
// agents with their own system prompt, tools, skills, model and step limit,
// defined in YAML files. The model delegates to one through the built-in
// `task` tool; the delegation runs as a child run of its own (see
// the orchestrator's subagent_task.go).

// Limits and defaults of a definition.
const (
	// DefaultIterations is the step limit of a definition that
	// sets no max_iterations.
	DefaultIterations = 10

	maxSubAgents               = 256
	maxSubAgentFileBytes       = 64 << 10
	maxSubAgentDescription     = 1024
	maxSubAgentDisplayName     = 128
	maxSubAgentSystemPrompt    = 32 << 10
	maxSubAgentListEntries     = 256
	maxSubAgentMaxIterations   = 500
	subAgentInheritModel       = "inherit"
	subAgentFileExt, altFileEx = ".yaml", ".yml"
)

// Definition is one sub-agent definition. An
// id, tenant_id and project_id are implied by the file (definitions are
// platform-wide); its trigger is the description, which the `task` tool
// shows to the model. Other formats' max_tokens, temperature and color are not
// accepted: the model request carries no sampling settings and colours
// belong to a UI.
type Definition struct {
	// Name identifies the agent (the `subagent_type` of a task call): 1–64
	// lowercase letters, digits and single hyphens, equal to the file's
	// base name.
	Name string `yaml:"name"`
	// DisplayName is for people (optional).
	DisplayName string `yaml:"display_name"`
	// Description says when to delegate to it; shown to the model.
	Description string `yaml:"description"`
	// SystemPrompt is appended to the platform's for the child run.
	SystemPrompt string `yaml:"system_prompt"`
	// Model is the child's model; empty or "inherit" uses the delegating
	// run's current model.
	Model string `yaml:"model"`
	// AllowedTools restricts the child's tools (names or globs); required,
	// ["*"] for every tool. `task` here lets it delegate further, within
	// the orchestrator's SubAgentMaxDepth.
	AllowedTools []string `yaml:"allowed_tools"`
	// AllowedSkills are the skills it may activate; none: no skill tool.
	AllowedSkills []string `yaml:"allowed_skills"`
	// AllowedMCPServers adds every tool of these MCP servers
	// (mcp__<server>__*).
	AllowedMCPServers []string `yaml:"allowed_mcp_servers"`
	// MaxIterations is the child's step limit (default 10).
	MaxIterations int `yaml:"max_iterations"`
}

// Tools is the child run's allow list: the allowed tools and the MCP
// servers' tools.
func (a *Definition) Tools() []string {
	out := slices.Clone(a.AllowedTools)
	for _, s := range a.AllowedMCPServers {
		out = append(out, "mcp__"+s+"__*")
	}
	return out
}

// ChildModel is the child's model for a parent on model parent.
func (a *Definition) ChildModel(parent string) string {
	if a.Model == "" || a.Model == subAgentInheritModel {
		return parent
	}
	return a.Model
}

// Parse decodes and validates one definition file's content. name,
// when not empty, is the file's base name the definition's name must equal.
func Parse(data []byte, name string) (*Definition, error) {
	if len(data) > maxSubAgentFileBytes {
		return nil, fmt.Errorf("the file is %d bytes; the maximum is %d", len(data), maxSubAgentFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	a := &Definition{}
	if err := dec.Decode(a); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not a sub-agent definition: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("one definition per file: the file has more than one YAML document")
	}
	if a.MaxIterations == 0 {
		a.MaxIterations = DefaultIterations
	}
	a.Description = strings.TrimSpace(a.Description)
	a.SystemPrompt = strings.TrimSpace(a.SystemPrompt)
	var e validate.Errors
	validate.SkillName(&e, "name", a.Name)
	if name != "" && a.Name != "" && a.Name != name {
		e.Addf("name", "%q must equal the file's base name %q", a.Name, name)
	}
	validate.Text(&e, "display_name", a.DisplayName, maxSubAgentDisplayName)
	validate.RequiredText(&e, "description", a.Description, maxSubAgentDescription)
	validate.RequiredText(&e, "system_prompt", a.SystemPrompt, maxSubAgentSystemPrompt)
	if a.Model != "" && a.Model != subAgentInheritModel {
		validate.Model(&e, "model", a.Model)
	}
	if len(a.AllowedTools) == 0 {
		e.Add("allowed_tools", `required: list the tools the sub-agent may use (["*"] for every tool)`)
	}
	validate.MaxItems(&e, "allowed_tools", len(a.AllowedTools), maxSubAgentListEntries)
	for i, t := range a.AllowedTools {
		validate.ToolPattern(&e, validate.Index("allowed_tools", i), t)
	}
	validate.MaxItems(&e, "allowed_skills", len(a.AllowedSkills), maxSubAgentListEntries)
	for i, s := range a.AllowedSkills {
		validate.SkillName(&e, validate.Index("allowed_skills", i), s)
	}
	validate.MaxItems(&e, "allowed_mcp_servers", len(a.AllowedMCPServers), maxSubAgentListEntries)
	for i, s := range a.AllowedMCPServers {
		// The server name becomes part of a tool glob.
		validate.ToolName(&e, validate.Index("allowed_mcp_servers", i), s)
	}
	validate.Range(&e, "max_iterations", a.MaxIterations, 1, maxSubAgentMaxIterations)
	if e.Len() > 0 {
		return nil, violations(&e)
	}
	return a, nil
}

// violations turns collected field violations into a plain error.
func violations(e *validate.Errors) error {
	parts := make([]string, 0, len(e.Violations()))
	for _, v := range e.Violations() {
		parts = append(parts, v.GetField()+": "+v.GetDescription())
	}
	return errors.New(strings.Join(parts, "; "))
}

// Load reads every definition (*.yaml, *.yml) of dir, sorted by
// name. Any file that does not load is an error naming it.
func Load(dir string) ([]*Definition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sub-agents dir: %w", err)
	}
	var out []*Definition
	var errs []error
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != subAgentFileExt && ext != altFileEx) {
			continue
		}
		if len(out) == maxSubAgents {
			errs = append(errs, fmt.Errorf("more than %d sub-agent definitions in %s", maxSubAgents, dir))
			break
		}
		path := filepath.Join(dir, e.Name())
		data, err := readSmallFile(path, maxSubAgentFileBytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		a, err := Parse(data, strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		out = append(out, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Definition) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name { // x.yaml and x.yml
			return nil, fmt.Errorf("%s: sub-agent %q is defined twice", dir, out[i].Name)
		}
	}
	return out, nil
}

// readSmallFile reads a regular file of at most max bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// Set is the loaded set of definitions, read-only once built.
type Set struct {
	list []*Definition // by name
}

// NewSet is the set of list, sorted by name.
func NewSet(list []*Definition) *Set { return &Set{list: list} }

// LoadDir loads the orchestrator's SubAgentsDir: empty or missing means none.
func LoadDir(dir string) (*Set, error) {
	if dir == "" {
		return &Set{}, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &Set{}, nil
	}
	list, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return &Set{list: list}, nil
}

// Get returns the definition named name, nil if none.
func (s *Set) Get(name string) *Definition {
	i, ok := slices.BinarySearchFunc(s.list, name, func(a *Definition, n string) int { return strings.Compare(a.Name, n) })
	if !ok {
		return nil
	}
	return s.list[i]
}

// Names returns the definitions' names, sorted.
func (s *Set) Names() []string {
	out := make([]string, len(s.list))
	for i, a := range s.list {
		out[i] = a.Name
	}
	return out
}

// All returns the definitions, sorted by name; the caller must not change
// them.
func (s *Set) All() []*Definition { return s.list }
