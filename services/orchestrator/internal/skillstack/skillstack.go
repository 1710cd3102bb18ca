// Package skillstack is a run's skill activation stack
// (docs/concepts/skills.md#in-a-run) and the store that carries it from one
// round of a conversation to the next.
package skillstack

import (
	"slices"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Activation is one skill on the run's activation stack.
type Activation struct {
	Name, ID string
	// Revision is the revision of the skill's content the activation
	// loaded; skill_read reads that revision's files.
	Revision string
	Modifier *baagentv1.ContextModifier
}

// Stack is the run's activation stack, outermost first. A skill stays
// active, with its context modifier applied, until its scope ends: the
// model ends it (or a skill it is nested in), or the skills service ends it
// when a sibling takes its place. Owned by the run's loop goroutine; the
// run changes it under its checkpoint lock, since checkpoints read it.
type Stack struct {
	frames []Activation
	// gen counts changes, so that a caller can tell that the stack
	// changed even when its depth did not (a sibling replaced a skill).
	gen uint64
}

// Chain is the names of the active skills, outermost first.
func (s *Stack) Chain() []string {
	out := make([]string, len(s.frames))
	for i, f := range s.frames {
		out[i] = f.Name
	}
	return out
}

// Push makes a the innermost active skill.
func (s *Stack) Push(a Activation) {
	s.frames = append(s.frames, a)
	s.gen++
}

// Index is the position of the skill called name, -1 when it is not active.
func (s *Stack) Index(name string) int {
	return slices.IndexFunc(s.frames, func(f Activation) bool { return f.Name == name })
}

// Find returns the active skill called name.
func (s *Stack) Find(name string) (Activation, bool) {
	if i := s.Index(name); i >= 0 {
		return s.frames[i], true
	}
	return Activation{}, false
}

// Innermost returns the innermost active skill.
func (s *Stack) Innermost() (Activation, bool) {
	if n := len(s.frames); n > 0 {
		return s.frames[n-1], true
	}
	return Activation{}, false
}

// EndFrom ends the scope of the skill at position i and of every skill
// nested in it, and returns them innermost first.
func (s *Stack) EndFrom(i int) []Activation {
	if i < 0 || i >= len(s.frames) {
		return nil
	}
	ended := slices.Clone(s.frames[i:])
	slices.Reverse(ended)
	s.frames = s.frames[:i]
	s.gen++
	return ended
}

// Remove takes the named skills off the stack, in the order given, and
// returns those that were on it. The skills service names the skills an
// activation ended (innermost first); removing them by name keeps the
// stack right whichever frames they are.
func (s *Stack) Remove(names []string) []Activation {
	var out []Activation
	for _, n := range names {
		if i := s.Index(n); i >= 0 {
			out = append(out, s.frames[i])
			s.frames = slices.Delete(s.frames, i, i+1)
			s.gen++
		}
	}
	return out
}

// Generation changes whenever the stack does.
func (s *Stack) Generation() uint64 { return s.gen }

// Model is the innermost active skill's model, else def.
func (s *Stack) Model(def string) string {
	for i := len(s.frames) - 1; i >= 0; i-- {
		if m := s.frames[i].Modifier.GetModel(); m != "" {
			return m
		}
	}
	return def
}

// CallerID is who makes tool calls: the innermost active skill, else the agent.
func (s *Stack) CallerID() string {
	if n := len(s.frames); n > 0 {
		return "skill:" + s.frames[n-1].Name
	}
	return "agent"
}

// AllowLists returns the allow lists in force, outermost first: the run's
// own (when the spec restricts tools) and each active skill's. A tool must
// pass every list, so a nested skill can narrow the tools but never widen
// them; a skill that ended no longer restricts anything.
func (s *Stack) AllowLists(spec []string) []*baagentv1.ToolAllowList {
	var lists []*baagentv1.ToolAllowList
	if len(spec) > 0 {
		lists = append(lists, &baagentv1.ToolAllowList{Names: spec})
	}
	for _, f := range s.frames {
		if l := f.Modifier.GetAllowedTools(); l != nil {
			lists = append(lists, l)
		}
	}
	return lists
}

// Depth is the number of active skills.
func (s *Stack) Depth() int { return len(s.frames) }

// Frames returns the activations, outermost first; the caller must not
// change them.
func (s *Stack) Frames() []Activation { return s.frames }
