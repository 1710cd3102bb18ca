package skills

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Directory layout under the skills root:
//
//	<root>/<skill>/SKILL.md                                   system layer
//	<root>/tenants/<tenant>/tenant.yaml                       tenant configuration
//	<root>/tenants/<tenant>/<skill>/SKILL.md                  tenant layer
//	<root>/tenants/<tenant>/projects/<project>/<skill>/SKILL.md  project layer
//
// "tenants" is therefore not a system skill name and "projects" not a tenant
// skill name. Entries whose names start with "." are ignored (editor swap
// files, `..data` of Kubernetes ConfigMap volumes).
const (
	tenantsDir  = "tenants"
	projectsDir = "projects"
	skillFile   = "SKILL.md"
)

// layer is the skills of one directory (system, one tenant, one project).
type layer struct {
	skills map[string]*skill
	// sorted holds the same skills ordered by name.
	sorted []*skill
	// invalid are the folders refused, by folder name; invalidList the same,
	// ordered.
	invalid     map[string]*baagentv1.SkillLoadError
	invalidList []*baagentv1.SkillLoadError
	// disabledSystem are system skills disabled for this project through
	// the API (SetSystemSkillState); nil for other layers.
	disabledSystem map[string]bool
}

func newLayer() *layer {
	return &layer{skills: map[string]*skill{}, invalid: map[string]*baagentv1.SkillLoadError{}}
}

func (l *layer) addInvalid(e *baagentv1.SkillLoadError) {
	l.invalid[e.GetFolder()] = e
	l.invalidList = append(l.invalidList, e)
}

// seal orders the layer once loading is done.
func (l *layer) seal() {
	l.sorted = make([]*skill, 0, len(l.skills))
	for _, n := range slices.Sorted(maps.Keys(l.skills)) {
		l.sorted = append(l.sorted, l.skills[n])
	}
	slices.SortFunc(l.invalidList, func(a, b *baagentv1.SkillLoadError) int {
		return strings.Compare(a.GetFolder(), b.GetFolder())
	})
}

// tenantLayer is one tenant's directory.
type tenantLayer struct {
	*layer
	rules    *tenantRules
	projects map[string]*layer
	// view is what the tenant sees without a project: system skills it does
	// not hide, replaced by its own where names collide; ordered by name.
	view []*skill
}

// snapshot is one immutable, fully loaded state of the skills root. Readers
// get it from an atomic pointer and never see a half-loaded set; the loader
// builds a new one and swaps it in.
type snapshot struct {
	// root is the skills root the snapshot was loaded from; resources are
	// read through it, confined to each skill's folder.
	root    *os.Root
	system  *layer
	tenants map[string]*tenantLayer
	// watch lists what the loader looked at, for cheap change detection.
	watch []watchEntry
	// racy is set when some watched entry changed so recently that a further
	// change within the file system's timestamp granularity could go
	// unnoticed; the next poll reloads regardless.
	racy     bool
	gen      uint64
	loadedAt time.Time
	// stored describes the skills merged in from the skill store; nil
	// when there are none (see store_layers.go).
	stored *storedInfo
	// storeGen is the Gen of the store View merged in (0 for none).
	storeGen uint64
}

// mergeView merges two layers ordered by name: lower skills for which hide
// returns true are left out, and an upper skill replaces a lower one of the
// same name.
func mergeView(lower, upper []*skill, hide func(string) bool) []*skill {
	out := make([]*skill, 0, len(lower)+len(upper))
	i, j := 0, 0
	for i < len(lower) || j < len(upper) {
		switch {
		case j == len(upper) || i < len(lower) && lower[i].name < upper[j].name:
			if hide == nil || !hide(lower[i].name) {
				out = append(out, lower[i])
			}
			i++
		case i == len(lower) || upper[j].name < lower[i].name:
			out = append(out, upper[j])
			j++
		default: // same name: the upper layer wins
			out = append(out, upper[j])
			i++
			j++
		}
	}
	return out
}

// view returns the effective skills of a tenant and optional project,
// ordered by name. The result is shared: callers must not modify it.
func (s *snapshot) view(tenant, project string) []*skill {
	t := s.tenants[tenant]
	if t == nil {
		return s.system.sorted
	}
	if project == "" {
		return t.view
	}
	p := t.projects[project]
	if p == nil {
		return t.view
	}
	return mergeView(t.view, p.sorted, p.hidesSystem(t))
}

// hidesSystem returns the hide function of a project's view over its
// tenant's view: system skills disabled for the project (a tenant skill of
// the same name is not a system skill and stays), or nil for none.
func (l *layer) hidesSystem(t *tenantLayer) func(string) bool {
	if len(l.disabledSystem) == 0 {
		return nil
	}
	return func(n string) bool { return l.disabledSystem[n] && t.skills[n] == nil }
}

// invalid returns the load errors a tenant and project can see: the system
// layer's, the tenant's (including its tenant.yaml) and the project's. Other
// tenants' errors are never included.
func (s *snapshot) invalid(tenant, project string) []*baagentv1.SkillLoadError {
	out := slices.Clone(s.system.invalidList)
	if t := s.tenants[tenant]; t != nil {
		out = append(out, t.invalidList...)
		if p := t.projects[project]; project != "" && p != nil {
			out = append(out, p.invalidList...)
		}
	}
	return out
}

// resolve finds the skill name for a tenant and project with the layer
// precedence project > tenant > system. The error is a gRPC status: NotFound
// for an unknown name, FailedPrecondition for a skill that exists but cannot
// be used (hidden by tenant.yaml, or refused by validation), naming why.
func (s *snapshot) resolve(tenant, project, name string) (*skill, error) {
	t := s.tenants[tenant]
	var p *layer
	if t != nil && project != "" {
		p = t.projects[project]
	}
	if p != nil {
		if sk := p.skills[name]; sk != nil {
			return sk, nil
		}
	}
	if t != nil {
		if sk := t.skills[name]; sk != nil {
			return sk, nil
		}
	}
	if sk := s.system.skills[name]; sk != nil {
		if t == nil {
			return sk, nil
		}
		hidden, why := t.rules.hides(name)
		if !hidden && p != nil && p.disabledSystem[name] {
			hidden, why = true, "disabled for project "+project
		}
		if !hidden {
			return sk, nil
		}
		return nil, status.Errorf(codes.FailedPrecondition, "skill %q is not available to tenant %q: %s", name, tenant, why)
	}
	// A refused skill is reported as such rather than as missing, so that
	// its author learns why.
	for _, l := range []*layer{p, layerOf(t), s.system} {
		if l == nil {
			continue
		}
		if e := l.invalid[name]; e != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "skill %q (%s layer) failed validation: %s",
				name, scopeName(e.GetScope()), e.GetReason())
		}
	}
	if project != "" {
		return nil, status.Errorf(codes.NotFound, "skill %q not found for tenant %q, project %q", name, tenant, project)
	}
	return nil, status.Errorf(codes.NotFound, "skill %q not found for tenant %q", name, tenant)
}

func layerOf(t *tenantLayer) *layer {
	if t == nil {
		return nil
	}
	return t.layer
}

// scopeName is the lowercase layer name used in catalogs and messages.
func scopeName(s baagentv1.SkillScope) string {
	switch s {
	case baagentv1.SkillScope_SKILL_SCOPE_SYSTEM:
		return "system"
	case baagentv1.SkillScope_SKILL_SCOPE_TENANT:
		return "tenant"
	case baagentv1.SkillScope_SKILL_SCOPE_PROJECT:
		return "project"
	}
	return "unknown"
}

// sealTenant computes a tenant's view and reports overrides that have no
// replacement, once the system and tenant layers are loaded.
func (s *snapshot) sealTenant(t *tenantLayer) {
	t.seal()
	for _, p := range t.projects {
		p.seal()
	}
	t.view = mergeView(s.system.sorted, t.sorted, func(n string) bool {
		hidden, _ := t.rules.hides(n)
		return hidden
	})
	for _, n := range slices.Sorted(maps.Keys(t.rules.overridden)) {
		if t.skills[n] == nil {
			t.invalidList = append(t.invalidList, &baagentv1.SkillLoadError{
				Folder: n,
				Scope:  baagentv1.SkillScope_SKILL_SCOPE_TENANT,
				Reason: fmt.Sprintf("tenant.yaml overrides system skill %q but the tenant has no valid skill of that name; the system skill stays hidden", n),
			})
		}
	}
}
