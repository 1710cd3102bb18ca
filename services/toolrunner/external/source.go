package external

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

// DefaultReservedNames are the built-in tools of the toolrunner; an external
// tool may not take these names.
var DefaultReservedNames = []string{"file_read", "file_write", "file_edit", "glob", "grep", "sql_query", "artifact_read"}

// nameRegistry decides which source owns a tool name. Built-in names are
// never given out; otherwise the first source to list a name owns it until a
// later listing of that source no longer has it. A source that goes down
// keeps its names, so that ownership does not flap between sources with every
// restart.
type nameRegistry struct {
	mu       sync.Mutex
	reserved map[string]bool
	owner    map[string]string // tool name -> source name; bounded by the servers' tool lists
}

func newNameRegistry(reserved []string) *nameRegistry {
	r := &nameRegistry{reserved: make(map[string]bool, len(reserved)), owner: make(map[string]string)}
	for _, n := range reserved {
		r.reserved[n] = true
	}
	return r
}

// refusal says why a tool is not offered.
type refusal struct {
	name   string
	reason string
}

// claim gives source the names of tools it is free to use, releases names it
// held that are not in tools any more, and returns the accepted tools and the
// refused ones.
func (r *nameRegistry) claim(source string, tools []tool.Tool) (accepted []tool.Tool, refused []refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	listed := make(map[string]bool, len(tools))
	for _, t := range tools {
		name := t.Spec().Name
		switch owner, taken := r.owner[name]; {
		case r.reserved[name]:
			refused = append(refused, refusal{name, "the name of a built-in tool"})
		case listed[name]:
			refused = append(refused, refusal{name, "listed twice by the server"})
		case taken && owner != source:
			refused = append(refused, refusal{name, "already offered by " + owner})
		default:
			listed[name] = true
			r.owner[name] = source
			accepted = append(accepted, t)
		}
	}
	for name, owner := range r.owner {
		if owner == source && !listed[name] {
			delete(r.owner, name)
		}
	}
	return accepted, refused
}

// release gives up every name of source.
func (r *nameRegistry) release(source string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, owner := range r.owner {
		if owner == source {
			delete(r.owner, name)
		}
	}
}

// sourceState is the part of a source shared by providers and MCP servers:
// the tools offered now and the bookkeeping of going up and down. It
// implements tool.Source.
type sourceState struct {
	name    string
	log     *slog.Logger
	metrics *metrics
	names   *nameRegistry

	mu          sync.RWMutex
	up          bool
	tools       []tool.Tool
	lastRefused map[string]string // name -> reason, to log each refusal once
	everUp      bool
}

func newSourceState(name string, log *slog.Logger, m *metrics, names *nameRegistry) *sourceState {
	m.initSource(name)
	return &sourceState{name: name, log: log.With("source", name), metrics: m, names: names}
}

// Name implements tool.Source.
func (s *sourceState) Name() string { return s.name }

// Tools implements tool.Source: the tools offered now, none while down.
func (s *sourceState) Tools() []tool.Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.up {
		return nil
	}
	return slices.Clone(s.tools)
}

// Up reports whether the source is connected and offers its tools.
func (s *sourceState) Up() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.up
}

// setTools publishes a fresh tool list (after filtering and name claims) and
// marks the source up. It reports whether the source was down before.
func (s *sourceState) setTools(candidates []tool.Tool, invalid []refusal) (cameUp bool) {
	accepted, refused := s.names.claim(s.name, candidates)
	refused = append(invalid, refused...)

	s.mu.Lock()
	cameUp = !s.up
	wasEverUp := s.everUp
	s.up, s.everUp, s.tools = true, true, accepted
	if cameUp && wasEverUp {
		// Counted before the tools are visible, so whoever sees the
		// restarted tools also sees the restart counted.
		s.metrics.restarts.WithLabelValues(s.name).Inc()
	}
	prev := s.lastRefused
	s.lastRefused = make(map[string]string, len(refused))
	for _, r := range refused {
		s.lastRefused[r.name] = r.reason
	}
	s.mu.Unlock()

	for _, r := range refused {
		if prev[r.name] != r.reason {
			s.log.Warn("external tool refused", "tool", r.name, "reason", r.reason)
		}
	}
	s.metrics.up.WithLabelValues(s.name).Set(1)
	s.metrics.tools.WithLabelValues(s.name).Set(float64(len(accepted)))
	s.metrics.refused.WithLabelValues(s.name).Set(float64(len(refused)))
	if cameUp {
		s.log.Info("external tool source up", "tools", len(accepted), "refused", len(refused))
	}
	return cameUp
}

// setDown withdraws the tools; it reports whether the source was up.
func (s *sourceState) setDown(reason error) (wentDown bool) {
	s.mu.Lock()
	wentDown = s.up
	s.up, s.tools = false, nil
	s.mu.Unlock()
	s.metrics.up.WithLabelValues(s.name).Set(0)
	s.metrics.tools.WithLabelValues(s.name).Set(0)
	switch {
	case !wentDown:
	case errors.Is(reason, context.Canceled):
		s.log.Info("external tool source stopped")
	default:
		s.log.Warn("external tool source down; its tools are unavailable", "error", reason)
	}
	return wentDown
}
