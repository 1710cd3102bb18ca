package skills

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// DefaultMaxDepth is how many skills may be active at once, nested (see
// docs/concepts/skills.md#activation).
const DefaultMaxDepth = 3

// Kinds of refused activation; test with errors.Is.
var (
	// ErrCircularDependency: the skill is already on the activation stack.
	ErrCircularDependency = errors.New("circular dependency")
	// ErrMaxDepth: the stack is full.
	ErrMaxDepth = errors.New("maximum activation depth exceeded")
	// ErrStackMismatch: a pop that does not match the top of the stack, or
	// a request whose depth disagrees with its chain.
	ErrStackMismatch = errors.New("activation stack mismatch")
)

// activationError carries the user-facing message and its kind.
type activationError struct {
	kind error
	msg  string
}

func (e *activationError) Error() string { return e.msg }
func (e *activationError) Unwrap() error { return e.kind }

// ActivationStack is the activation stack: the skills active in
// one conversation, outermost first. It is a call stack, not a history: a
// skill is pushed when activated and popped when it completes. The skills
// service itself is stateless (a caller sends its chain with each
// ActivateSkill); the stack is what a caller such as the orchestrator keeps.
// It is safe for concurrent use.
type ActivationStack struct {
	mu       sync.Mutex
	maxDepth int
	frames   []activationFrame
}

type activationFrame struct{ name, id string }

// NewActivationStack returns an empty stack holding at most maxDepth skills
// (DefaultMaxDepth when maxDepth <= 0).
func NewActivationStack(maxDepth int) *ActivationStack {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	return &ActivationStack{maxDepth: maxDepth}
}

// Push activates name. It refuses a skill already on the stack, direct
// (a → a) or indirect (a → b → c → a), with the full path in the error
// (`Circular dependency detected: a → b → c → a`), and a push beyond the
// maximum depth. A refused push leaves the stack unchanged.
func (s *ActivationStack) Push(name, activationID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(name); err != nil {
		return err
	}
	s.frames = append(s.frames, activationFrame{name, activationID})
	return nil
}

func (s *ActivationStack) check(name string) error {
	names := s.namesLocked()
	if slices.Contains(names, name) {
		return &activationError{ErrCircularDependency,
			"Circular dependency detected: " + strings.Join(append(names, name), " → ")}
	}
	if len(names) >= s.maxDepth {
		return &activationError{ErrMaxDepth,
			fmt.Sprintf("Maximum skill activation depth (%d) exceeded. Current stack: %s", s.maxDepth, strings.Join(names, " → "))}
	}
	return nil
}

// Pop completes the innermost activation. name and activationID must match
// the top of the stack; otherwise nothing is popped and the error says what
// was expected, since a mismatch means the caller lost track of its
// activations.
func (s *ActivationStack) Pop(name, activationID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.frames) == 0 {
		return &activationError{ErrStackMismatch, fmt.Sprintf("Stack mismatch: pop of %q from an empty activation stack", name)}
	}
	top := s.frames[len(s.frames)-1]
	if top.name != name || top.id != activationID {
		return &activationError{ErrStackMismatch,
			fmt.Sprintf("Stack mismatch: expected %q (activation %q) but got %q (activation %q)", top.name, top.id, name, activationID)}
	}
	s.frames = s.frames[:len(s.frames)-1]
	return nil
}

// Contains reports whether name is on the stack.
func (s *ActivationStack) Contains(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.namesLocked(), name)
}

// Chain returns the active skills, outermost first.
func (s *ActivationStack) Chain() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namesLocked()
}

// Depth returns how many skills are active.
func (s *ActivationStack) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.frames)
}

func (s *ActivationStack) namesLocked() []string {
	out := make([]string, len(s.frames))
	for i, f := range s.frames {
		out[i] = f.name
	}
	return out
}

// checkActivation applies the stack rules to a stateless ActivateSkill: the
// caller's chain (outermost first) is rebuilt as a stack and name is pushed
// on it. It returns the chain after the push. activation_depth, when given,
// must equal the chain's length (a caller increments both together); a
// disagreement means the caller lost track and is refused.
func checkActivation(chain []string, depth, maxDepth int, name, activationID string) ([]string, error) {
	if depth != 0 && depth != len(chain) {
		return nil, &activationError{ErrStackMismatch, fmt.Sprintf(
			"Stack mismatch: activation_depth is %d but activation_chain holds %d skills (%s)",
			depth, len(chain), strings.Join(chain, " → "))}
	}
	st := NewActivationStack(maxDepth)
	for i, n := range chain {
		// A chain that already repeats a skill is itself a cycle.
		if slices.Contains(chain[:i], n) {
			return nil, &activationError{ErrCircularDependency,
				"Circular dependency detected: " + strings.Join(chain[:i+1], " → ")}
		}
		st.frames = append(st.frames, activationFrame{name: n})
	}
	if err := st.Push(name, activationID); err != nil {
		return nil, err
	}
	return st.Chain(), nil
}

// activationMessages builds the messages a successful activation injects,
// by level (SkillMessage): a visible metadata message, the hidden
// instructions from level 2, the resource contents at level 3, and a hidden
// permissions message when the skill restricts tools or asks for a model.
func activationMessages(sk *skill, level baagentv1.SkillLoadLevel, resources []*baagentv1.SkillResource) []*baagentv1.SkillMessage {
	var msgs []*baagentv1.SkillMessage
	meta := fmt.Sprintf("Skill %q activated (%s layer", sk.name, scopeName(sk.scope))
	if sk.version != "" {
		meta += ", version " + sk.version
	}
	meta += "): " + strings.Join(strings.Fields(sk.description), " ")
	msgs = append(msgs, &baagentv1.SkillMessage{
		Type:       baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_METADATA,
		Content:    meta,
		Visibility: baagentv1.SkillMessageVisibility_SKILL_MESSAGE_VISIBILITY_VISIBLE,
	})
	if level >= baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS {
		msgs = append(msgs, hidden(baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_INSTRUCTION, instructions(sk)))
	}
	for _, r := range resources {
		if r.GetContent() == "" {
			continue
		}
		c := fmt.Sprintf("<skill_resource skill=%q path=%q>\n%s\n</skill_resource>", sk.name, r.GetPath(), r.GetContent())
		if r.GetTruncated() {
			c += fmt.Sprintf("\n(%s is cut here; it has %d bytes in all.)", r.GetPath(), r.GetSizeBytes())
		}
		msgs = append(msgs, hidden(baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_INSTRUCTION, c))
	}
	if p := permissions(sk); p != "" {
		msgs = append(msgs, hidden(baagentv1.SkillMessageType_SKILL_MESSAGE_TYPE_PERMISSIONS, p))
	}
	return msgs
}

func hidden(t baagentv1.SkillMessageType, content string) *baagentv1.SkillMessage {
	return &baagentv1.SkillMessage{Type: t, Content: content, Visibility: baagentv1.SkillMessageVisibility_SKILL_MESSAGE_VISIBILITY_HIDDEN}
}

// instructions is the level-2 text: the SKILL.md body, and the files the
// skill bundles, which the model asks for by relative path (level 3).
func instructions(sk *skill) string {
	var b strings.Builder
	b.WriteString(sk.body)
	if len(sk.resources) > 0 {
		b.WriteString("\n\n---\nFiles bundled with this skill (read one by its path relative to the skill when you need it):\n")
		for _, r := range sk.resources {
			b.WriteString("- ")
			b.WriteString(r)
			b.WriteByte('\n')
		}
	}
	return strings.TrimSpace(b.String())
}

func permissions(sk *skill) string {
	var parts []string
	switch {
	case sk.restrictsTools && len(sk.allowedTools) == 0:
		parts = append(parts, "no tools are allowed")
	case sk.restrictsTools:
		parts = append(parts, "only these tools are allowed: "+strings.Join(sk.allowedTools, ", "))
	}
	if sk.model != "" {
		parts = append(parts, "the model is "+sk.model)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("While the %q skill is active, %s.", sk.name, strings.Join(parts, "; "))
}

// contextModifier is the ContextModifier of a skill.
func contextModifier(sk *skill) *baagentv1.ContextModifier {
	cm := &baagentv1.ContextModifier{Model: sk.model, DisableModelInvocation: sk.disableModelInvocation}
	if sk.restrictsTools {
		cm.AllowedTools = &baagentv1.ToolAllowList{Names: slices.Clone(sk.allowedTools)}
	}
	return cm
}
