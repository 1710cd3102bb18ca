package toolrunner

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// registry finds tools: the built-in ones, fixed at start, then those the
// sources offer at the moment of the call. A name is served by the first
// tool that claims it, built-ins first, then sources in order.
type registry struct {
	log      *slog.Logger
	builtins map[string]tool.Tool
	order    []tool.Tool
	sources  []tool.Source
	schemas  *schemaCache
}

func newRegistry(log *slog.Logger, builtins []tool.Tool, sources []tool.Source) (*registry, error) {
	r := &registry{log: log, builtins: map[string]tool.Tool{}, sources: sources, schemas: newSchemaCache(schemaCacheEntries)}
	for _, t := range builtins {
		s := t.Spec()
		if _, dup := r.builtins[s.Name]; dup {
			return nil, fmt.Errorf("tool %s registered twice", s.Name)
		}
		if _, err := r.schemas.get(s.Parameters); err != nil {
			return nil, fmt.Errorf("tool %s: %w", s.Name, err)
		}
		r.builtins[s.Name] = t
		r.order = append(r.order, t)
	}
	return r, nil
}

// usable reports whether a source's tool may be offered: a valid name not
// taken by a built-in.
func (r *registry) usable(s tool.Spec) bool {
	var e validate.Errors
	validate.ToolName(&e, "name", s.Name)
	if e.Len() > 0 {
		return false
	}
	_, builtin := r.builtins[s.Name]
	return !builtin
}

// lookup finds the tool called name.
func (r *registry) lookup(name string) (tool.Tool, bool) {
	if t, ok := r.builtins[name]; ok {
		return t, true
	}
	for _, src := range r.sources {
		for _, t := range src.Tools() {
			if s := t.Spec(); s.Name == name && r.usable(s) {
				return t, true
			}
		}
	}
	return nil, false
}

// all lists every tool, sorted by name, the first claim of a name winning.
func (r *registry) all() []tool.Tool {
	out := slices.Clone(r.order)
	seen := map[string]bool{}
	for n := range r.builtins {
		seen[n] = true
	}
	for _, src := range r.sources {
		for _, t := range src.Tools() {
			s := t.Spec()
			if seen[s.Name] || !r.usable(s) {
				continue
			}
			seen[s.Name] = true
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b tool.Tool) int { return strings.Compare(a.Spec().Name, b.Spec().Name) })
	return out
}

// lookupFor finds the tool called name for tenant: lookup's tools, then
// the tenant's own tools of tenant-aware sources (auth: oauth MCP servers).
func (r *registry) lookupFor(ctx context.Context, tenant, name string) (tool.Tool, bool) {
	if t, ok := r.lookup(name); ok {
		return t, true
	}
	for _, src := range r.sources {
		ts, ok := src.(tool.TenantSource)
		if !ok {
			continue
		}
		if t, ok := ts.TenantTool(ctx, tenant, name); ok && r.usable(t.Spec()) {
			return t, true
		}
	}
	return nil, false
}

// allFor is all plus tenant's own tools of tenant-aware sources, sorted by
// name, the first claim of a name winning.
func (r *registry) allFor(ctx context.Context, tenant string) []tool.Tool {
	out := r.all()
	seen := make(map[string]bool, len(out))
	for _, t := range out {
		seen[t.Spec().Name] = true
	}
	added := false
	for _, src := range r.sources {
		ts, ok := src.(tool.TenantSource)
		if !ok {
			continue
		}
		for _, t := range ts.TenantTools(ctx, tenant) {
			s := t.Spec()
			if seen[s.Name] || !r.usable(s) {
				continue
			}
			seen[s.Name] = true
			out = append(out, t)
			added = true
		}
	}
	if added {
		slices.SortFunc(out, func(a, b tool.Tool) int { return strings.Compare(a.Spec().Name, b.Spec().Name) })
	}
	return out
}

// schemaCacheEntries bounds the resolved schemas kept (one per distinct
// schema of every tool offered).
const schemaCacheEntries = 1024

// schemaCache keeps resolved JSON Schemas by the hash of their text, so
// that a source's tools, rebuilt on every listing, are not re-resolved on
// every call.
type schemaCache struct {
	resolved *lru.Cache[[32]byte, *schemaEntry]
}

type schemaEntry struct {
	resolved *jsonschema.Resolved
	err      error
}

func newSchemaCache(max int) *schemaCache {
	return &schemaCache{resolved: lru.New[[32]byte, *schemaEntry](lru.Options{MaxEntries: max})}
}

// get resolves a schema (nil or empty: no validation, nil result).
func (c *schemaCache) get(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	key := sha256.Sum256(raw)
	if e, ok := c.resolved.Get(key); ok {
		return e.resolved, e.err
	}
	// Resolved outside the cache's lock: two first calls may both resolve,
	// and the first to store wins.
	e := &schemaEntry{}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		e.err = fmt.Errorf("parameters schema: %w", err)
	} else if e.resolved, err = s.Resolve(nil); err != nil {
		e.err = fmt.Errorf("parameters schema: %w", err)
	}
	e = c.resolved.GetOrAdd(key, func() *schemaEntry { return e })
	return e.resolved, e.err
}
