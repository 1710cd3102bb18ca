// Package skillstack is a run's skill activation stack
// (docs/concepts/skills.md).
package skillstack

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Activation is one skill on the run's activation stack.
type Activation struct {
	Name, ID string
	Modifier *baagentv1.ContextModifier
}

// Stack is the run's activation stack. A
// skill stays active, with its context modifier applied, until the run's
// round ends with a final answer; a skill activated while others are active
// is nested in them and carries the chain. Owned by the run's loop
// goroutine.
type Stack struct {
	frames []Activation
}

// Chain is the names of the active skills, outermost first.
func (s *Stack) Chain() []string {
	out := make([]string, len(s.frames))
	for i, f := range s.frames {
		out[i] = f.Name
	}
	return out
}

func (s *Stack) Push(a Activation) { s.frames = append(s.frames, a) }

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
// them.
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
