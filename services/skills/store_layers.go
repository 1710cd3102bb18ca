package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/skills/store"
)

// storedInfo is what a snapshot knows about the skills merged in from the
// skill store.
type storedInfo struct {
	// shadowed are the file skills of a tenant or project layer that a
	// stored skill of the same name replaces, listed as overridden.
	shadowed map[store.Scope][]*skill
}

// parsedKey names one revision of a stored skill.
type parsedKey struct {
	key      store.Key
	revision string
}

// parsedSkill is a stored revision's SKILL.md parsed once: skills are
// immutable, so every snapshot that holds the revision shares it.
type parsedSkill struct {
	sk  *skill
	err error
}

// combine returns files with the store's view merged in: a stored tenant
// (project) skill joins the tenant (project) layer and replaces a file
// skill of the same name there; disabled system skills join the tenant's
// rules (a project's go on the project layer). files itself is not
// modified: the layers a stored skill touches are copied. parsed holds the
// revisions parsed by the previous combine; the returned map holds those of
// this view, so a change re-parses only what changed. st reads the stored
// skills' files.
func combine(files *snapshot, st *store.Store, v *store.View, parsed map[parsedKey]parsedSkill) (*snapshot, map[parsedKey]parsedSkill) {
	out := *files
	if v == nil || len(v.Skills) == 0 && len(v.Disabled) == 0 {
		return &out, nil
	}
	nextParsed := make(map[parsedKey]parsedSkill, len(v.Skills))
	out.tenants = maps.Clone(files.tenants)
	info := &storedInfo{shadowed: map[store.Scope][]*skill{}}
	touched := map[string]*tenantLayer{}
	touchedProjects := map[store.Scope]*layer{}
	tenantOf := func(name string) *tenantLayer {
		if t := touched[name]; t != nil {
			return t
		}
		t := &tenantLayer{layer: newLayer(), rules: &tenantRules{}, projects: map[string]*layer{}}
		if ft := files.tenants[name]; ft != nil {
			t.layer, t.rules, t.projects = cloneLayer(ft.layer), ft.rules, maps.Clone(ft.projects)
		}
		touched[name] = t
		out.tenants[name] = t
		return t
	}
	projectOf := func(t *tenantLayer, sc store.Scope) *layer {
		if p := touchedProjects[sc]; p != nil {
			return p
		}
		p := newLayer()
		if fp := t.projects[sc.Project]; fp != nil {
			p = cloneLayer(fp)
		}
		t.projects[sc.Project] = p
		touchedProjects[sc] = p
		return p
	}
	for _, m := range v.Skills {
		t := tenantOf(m.Tenant)
		sc := store.Scope{Tenant: m.Tenant, Project: m.Project}
		ly, scope := t.layer, storedScope(m.Project)
		if m.Project != "" {
			ly = projectOf(t, sc)
		}
		pk := parsedKey{key: m.Key(), revision: m.Revision}
		p, ok := parsed[pk]
		if !ok {
			p.sk, p.err = storedSkill(st, m, scope)
		}
		nextParsed[pk] = p
		sk, err := p.sk, p.err
		if err != nil {
			// Validated when stored; refused now only if the rules have
			// changed since. Reported like a refused folder.
			delete(ly.skills, m.Name)
			e := &baagentv1.SkillLoadError{Folder: m.Name, Scope: scope, Reason: "stored revision " + m.Revision + ": " + err.Error()}
			ly.invalid[m.Name] = e
			ly.invalidList = append(ly.invalidList, e)
			continue
		}
		if old := ly.skills[m.Name]; old != nil {
			info.shadowed[sc] = append(info.shadowed[sc], old)
		}
		ly.skills[m.Name] = sk
	}
	for sc, set := range v.Disabled {
		if len(set) == 0 {
			continue
		}
		t := tenantOf(sc.Tenant)
		if sc.Project != "" {
			projectOf(t, sc).disabledSystem = set
			continue
		}
		r := &tenantRules{disabled: maps.Clone(t.rules.disabled), overridden: t.rules.overridden, invalid: t.rules.invalid}
		if r.disabled == nil {
			r.disabled = map[string]bool{}
		}
		maps.Copy(r.disabled, set)
		t.rules = r
	}
	for _, p := range touchedProjects {
		p.seal()
	}
	for _, t := range touched {
		t.seal()
		// An override tenant.yaml declared without a replacement may now
		// have one from the store.
		t.invalidList = slices.DeleteFunc(t.invalidList, func(e *baagentv1.SkillLoadError) bool {
			return t.skills[e.GetFolder()] != nil && strings.HasPrefix(e.GetReason(), "tenant.yaml overrides")
		})
		t.view = mergeView(out.system.sorted, t.sorted, func(n string) bool {
			hidden, _ := t.rules.hides(n)
			return hidden
		})
	}
	out.stored = info
	return &out, nextParsed
}

// cloneLayer copies a layer's maps and lists so that stored skills can be
// added without changing the file snapshot's.
func cloneLayer(l *layer) *layer {
	return &layer{
		skills:         maps.Clone(l.skills),
		invalid:        maps.Clone(l.invalid),
		invalidList:    slices.Clone(l.invalidList),
		disabledSystem: l.disabledSystem,
	}
}

// storedSkill parses a stored skill's SKILL.md with the rules a file
// skill's goes through, its manifest's name standing for the folder name,
// and finishes it as the loader finishes a file skill: its revision is the
// store revision and its files are read from that revision's bundle.
func storedSkill(st *store.Store, m *store.Manifest, scope baagentv1.SkillScope) (*skill, error) {
	sk, err := parseSkillMD([]byte(m.SkillMD), m.Name)
	if err != nil {
		return nil, err
	}
	finishStored(sk, st, m, scope)
	return sk, nil
}

// finishStored finishes sk, parsed from m's SKILL.md, as a stored skill.
func finishStored(sk *skill, st *store.Store, m *store.Manifest, scope baagentv1.SkillScope) {
	resources := make([]resourceInfo, 0, len(m.Files))
	for _, f := range m.Files {
		resources = append(resources, resourceInfo{path: f.Path, size: f.Size})
	}
	sortResources(resources)
	sk.finish(scope, baagentv1.SkillSource_SKILL_SOURCE_STORE, resources, m.Revision,
		storeBundle{st: st, key: m.Key(), revision: m.Revision})
}

// storedScope is the scope of a stored skill of project ("" for the
// tenant's).
func storedScope(project string) baagentv1.SkillScope {
	if project != "" {
		return baagentv1.SkillScope_SKILL_SCOPE_PROJECT
	}
	return baagentv1.SkillScope_SKILL_SCOPE_TENANT
}

// storeBundle is a stored skill's resourceFS: the files of one revision,
// read from the store (which caches recently read bundles). SKILL.md is in
// the bundle, as it is in a file skill's folder.
type storeBundle struct {
	st       *store.Store
	key      store.Key
	revision string
}

func (b storeBundle) open(ctx context.Context, rel string) (io.ReadCloser, int64, error) {
	files, _, err := b.st.ReadFiles(ctx, b.key, b.revision)
	if errors.Is(err, store.ErrNotFound) {
		// The revision was replaced and is no longer kept: its files are
		// gone, as a file skill's removed file is.
		return nil, 0, fmt.Errorf("%w: %v", fs.ErrNotExist, err)
	}
	if err != nil {
		return nil, 0, storeError(err)
	}
	for _, f := range files {
		if f.Path == rel {
			return io.NopCloser(bytes.NewReader(f.Data)), int64(len(f.Data)), nil
		}
	}
	return nil, 0, fs.ErrNotExist
}

// storeRevisions is the revisionSource of a server with a skill store: a
// stored skill's earlier revisions stay readable while its manifest keeps
// them; a file skill keeps only its current revision.
type storeRevisions struct {
	st  *store.Store
	log *slog.Logger
}

func (r storeRevisions) skillAt(ctx context.Context, cur *skill, revision string) (*skill, bool, error) {
	b, ok := cur.files.(storeBundle)
	if !ok {
		return nil, false, nil
	}
	files, _, err := r.st.ReadFiles(ctx, b.key, revision)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storeError(err)
	}
	old := &store.Manifest{Tenant: b.key.Tenant, Project: b.key.Project, Name: b.key.Name, Revision: revision}
	for _, f := range files {
		if f.Path == store.SkillFile {
			old.SkillMD = string(f.Data)
		} else {
			old.Files = append(old.Files, store.FileInfo{Path: f.Path, Size: int64(len(f.Data))})
		}
	}
	sk, err := storedSkill(r.st, old, cur.scope)
	if err != nil {
		// Valid when stored; the rules have changed since. Only the
		// current revision can be served.
		r.log.WarnContext(ctx, "skills: a kept revision no longer validates", "skill", cur.name, "revision", revision, "error", err)
		return nil, false, nil
	}
	return sk, true, nil
}
