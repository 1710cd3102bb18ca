package skills

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// DefaultMaxDepth is how many skills may be nested in one another (see
// docs/concepts/skills.md#activation).
const DefaultMaxDepth = 3

// Kinds of refused activation; test with errors.Is.
var (
	// ErrCircularDependency: the skill is already on the activation stack
	// below the active skill whose instructions name it.
	ErrCircularDependency = errors.New("circular dependency")
	// ErrMaxDepth: the skill would be nested deeper than the limit.
	ErrMaxDepth = errors.New("maximum activation depth exceeded")
	// ErrStackMismatch: a request whose depth disagrees with its chain.
	ErrStackMismatch = errors.New("activation stack mismatch")
)

// ErrModelInvocationDisabled: the model asked for a skill that only the
// user or a trigger may activate.
var ErrModelInvocationDisabled = errors.New("model invocation disabled")

// activationError carries the user-facing message and its kind.
type activationError struct {
	kind error
	msg  string
}

func (e *activationError) Error() string { return e.msg }
func (e *activationError) Unwrap() error { return e.kind }

// activationPlan is what an activation does to the caller's stack.
type activationPlan struct {
	// chain is the stack after the activation, outermost first.
	chain []string
	// ended are the skills whose scope ends, innermost first.
	ended []string
	// alreadyActive: the skill is the innermost active skill after the
	// pops; nothing is pushed.
	alreadyActive bool
}

// planActivation applies the activation rule (docs/concepts/skills.md#activation)
// to the caller's chain, outermost first. The service keeps no stack: the
// caller sends its chain and applies the plan.
//
// The new skill s is nested in the innermost active skill t only if t's
// instructions name s (names reports that); otherwise t's scope ends and
// the next one out is tried, so a skill named by no active skill ends them
// all and starts alone. Meeting s itself while popping makes it the
// innermost again: it is already active, and nothing is pushed. s on the
// stack below the skill that names it is a real cycle, refused with the
// full path. Depth counts nesting only: maxDepth skills may be nested.
// activation_depth, when given, must equal the chain's length (a caller
// increments both together); a disagreement means the caller lost track
// and is refused. A refusal changes nothing: no scope ends.
func planActivation(chain []string, depth, maxDepth int, name string, names func(parent string) bool) (activationPlan, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if depth != 0 && depth != len(chain) {
		return activationPlan{}, &activationError{ErrStackMismatch, fmt.Sprintf(
			"Stack mismatch: activation_depth is %d but activation_chain holds %d skills (%s)",
			depth, len(chain), strings.Join(chain, " → "))}
	}
	for i, n := range chain {
		// A chain that already repeats a skill is itself a cycle.
		if slices.Contains(chain[:i], n) {
			return activationPlan{}, &activationError{ErrCircularDependency,
				"Circular dependency detected: " + strings.Join(chain[:i+1], " → ")}
		}
	}
	var ended []string
	top := len(chain) // chain[:top] stays active
	for ; top > 0; top-- {
		t := chain[top-1]
		if t == name {
			return activationPlan{chain: slices.Clone(chain[:top]), ended: ended, alreadyActive: true}, nil
		}
		if names(t) {
			break
		}
		ended = append(ended, t)
	}
	kept := chain[:top]
	if slices.Contains(kept, name) {
		return activationPlan{}, &activationError{ErrCircularDependency, fmt.Sprintf(
			"Circular dependency detected: %s → %s (the instructions of %q name %q, which is already active further out)",
			strings.Join(kept, " → "), name, kept[len(kept)-1], name)}
	}
	if len(kept) >= maxDepth {
		return activationPlan{}, &activationError{ErrMaxDepth, fmt.Sprintf(
			"Maximum skill activation depth (%d) exceeded: %q would be nested in %s, each skill's instructions naming the next",
			maxDepth, name, strings.Join(kept, " → "))}
	}
	return activationPlan{chain: append(slices.Clone(kept), name), ended: ended}, nil
}

// namesSkill reports whether body names the skill name: as a word (not part
// of a longer name: `sales` is not named by `sales-report`), as `/name`, or
// in a link or path (`../name/SKILL.md`). Case is ignored; names are
// lowercase.
func namesSkill(body, name string) bool {
	if name == "" {
		return false
	}
	lower := strings.ToLower(body)
	for off := 0; off < len(lower); {
		i := strings.Index(lower[off:], name)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(name)
		if (i == 0 || !nameByte(lower[i-1])) && (end == len(lower) || !nameByte(lower[end])) {
			return true
		}
		off = i + 1
	}
	return false
}

// nameByte reports whether c can continue a skill name (or a word around
// it), so that a match next to it is part of a longer word. Other scripts
// count as boundaries: CJK text names a skill without spaces around it.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// activationMessages builds the messages a successful activation injects,
// by level (SkillMessage): a visible metadata message, the hidden
// instructions from level 2, the resource contents at level 3, and a hidden
// permissions message when the skill restricts tools or asks for a model.
func activationMessages(sk *skill, level baagentv1.SkillLoadLevel, resources []*baagentv1.SkillResource, note string) []*baagentv1.SkillMessage {
	var msgs []*baagentv1.SkillMessage
	meta := fmt.Sprintf("Skill %q activated (%s layer", sk.name, scopeName(sk.scope))
	if sk.version != "" {
		meta += ", version " + sk.version
	}
	meta += "): " + catalogDescription(sk)
	if note != "" {
		meta += " (" + note + ")"
	}
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

// instructions is the level-2 text: the SKILL.md body, then the files the
// skill bundles (level 3) with their sizes and how the model reads them.
func instructions(sk *skill) string {
	var b strings.Builder
	b.WriteString(sk.body)
	if len(sk.resources) > 0 {
		b.WriteString("\n\n---\nFiles bundled with this skill (level 3). Read one when the instructions call for it with the ")
		b.WriteString(SkillReadTool)
		fmt.Fprintf(&b, " tool: {\"skill\": %q, \"path\": \"<path below>\"}, adding \"offset\" (the 0-based line to start at) to page through a long file.\n", sk.name)
		for _, r := range sk.resources {
			fmt.Fprintf(&b, "- %s (%s)\n", r.path, byteSize(r.size))
		}
	}
	return strings.TrimSpace(b.String())
}

// SkillReadTool is the name of the orchestrator's tool that reads a skill's
// bundled files (through ReadSkillResource); level-2 instructions name it.
const SkillReadTool = "skill_read"

// byteSize renders a size for the model: bytes, KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
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
