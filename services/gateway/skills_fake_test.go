package gateway

import (
	"bytes"
	"context"
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// fakeSkills is an in-memory SkillsService with the documented behaviour of
// the skill store: tenant and project skills keyed by tenant, project and
// name, a revision per write, Aborted for If-Match / If-None-Match
// failures, NotFound, InvalidArgument for content it cannot read (here:
// content starting with "bad"), system skills that can be disabled per
// tenant or project, and Unimplemented for every write when off is set.
type fakeSkills struct {
	baagentv1.UnimplementedSkillsServiceServer

	mu       sync.Mutex
	system   []string                // system skill names
	stored   map[string]*storedSkill // tenant/project/name
	disabled map[string]bool         // tenant/project/name of a system skill
	puts     []*baagentv1.PutSkillRequest
	rev      int
	off      bool // the store is off: writes answer Unimplemented
	lists    []*baagentv1.ListSkillsRequest
}

type storedSkill struct {
	meta    *baagentv1.SkillMetadata
	content []byte
	format  baagentv1.SkillArchiveFormat
}

func newFakeSkills(system ...string) *fakeSkills {
	return &fakeSkills{system: system, stored: map[string]*storedSkill{}, disabled: map[string]bool{}}
}

func skillKey(tenant, project, name string) string { return tenant + "/" + project + "/" + name }

func (f *fakeSkills) storeOff() error {
	if f.off {
		return status.Error(codes.Unimplemented, "the skill store is off (no JetStream): tenant skills are files only")
	}
	return nil
}

func (f *fakeSkills) PutSkill(_ context.Context, req *baagentv1.PutSkillRequest) (*baagentv1.PutSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.storeOff(); err != nil {
		return nil, err
	}
	f.puts = append(f.puts, req)
	if bytes.HasPrefix(req.GetContent(), []byte("bad")) {
		return nil, status.Error(codes.InvalidArgument, "invalid argument: content: not a zip, tar, tar.gz or SKILL.md")
	}
	key := skillKey(req.GetTenant(), req.GetProject(), req.GetName())
	old := f.stored[key]
	switch {
	case req.GetIfNoneMatch() && old != nil:
		return nil, status.Errorf(codes.Aborted, "skill %q exists (revision %s) and if_none_match is set", req.GetName(), old.meta.GetRevision())
	case req.GetIfMatch() != "" && (old == nil || old.meta.GetRevision() != req.GetIfMatch()):
		return nil, status.Errorf(codes.Aborted, "skill %q is not at revision %s", req.GetName(), req.GetIfMatch())
	}
	f.rev++
	scope := baagentv1.SkillScope_SKILL_SCOPE_TENANT
	if req.GetProject() != "" {
		scope = baagentv1.SkillScope_SKILL_SCOPE_PROJECT
	}
	meta := &baagentv1.SkillMetadata{Name: req.GetName(), Description: "uploaded", Scope: scope, Revision: strconv.Itoa(f.rev), Source: baagentv1.SkillSource_SKILL_SOURCE_STORE}
	f.stored[key] = &storedSkill{meta: meta, content: req.GetContent(), format: req.GetFormat()}
	return &baagentv1.PutSkillResponse{Skill: meta, Replaced: old != nil}, nil
}

func (f *fakeSkills) DeleteSkill(_ context.Context, req *baagentv1.DeleteSkillRequest) (*baagentv1.DeleteSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.storeOff(); err != nil {
		return nil, err
	}
	key := skillKey(req.GetTenant(), req.GetProject(), req.GetName())
	old := f.stored[key]
	switch {
	case old == nil:
		return nil, status.Errorf(codes.NotFound, "skill %q not found for tenant %q", req.GetName(), req.GetTenant())
	case req.GetIfMatch() != "" && old.meta.GetRevision() != req.GetIfMatch():
		return nil, status.Errorf(codes.Aborted, "skill %q is not at revision %s", req.GetName(), req.GetIfMatch())
	}
	delete(f.stored, key)
	return &baagentv1.DeleteSkillResponse{Revision: old.meta.GetRevision()}, nil
}

func (f *fakeSkills) SetSystemSkillState(_ context.Context, req *baagentv1.SetSystemSkillStateRequest) (*baagentv1.SetSystemSkillStateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.storeOff(); err != nil {
		return nil, err
	}
	for _, n := range f.system {
		if n == req.GetName() {
			f.disabled[skillKey(req.GetTenant(), req.GetProject(), n)] = req.GetDisabled()
			return &baagentv1.SetSystemSkillStateResponse{Skill: f.systemMeta(req.GetTenant(), req.GetProject(), n)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no system skill %q", req.GetName())
}

func (f *fakeSkills) systemMeta(tenant, project, name string) *baagentv1.SkillMetadata {
	return &baagentv1.SkillMetadata{
		Name: name, Description: "system", Scope: baagentv1.SkillScope_SKILL_SCOPE_SYSTEM, Revision: "sys-" + name,
		Source:     baagentv1.SkillSource_SKILL_SOURCE_FILES,
		IsDisabled: f.disabled[skillKey(tenant, "", name)] || (project != "" && f.disabled[skillKey(tenant, project, name)]),
		IsOverridden: f.stored[skillKey(tenant, "", name)] != nil ||
			(project != "" && f.stored[skillKey(tenant, project, name)] != nil),
	}
}

// ListSkills reports the layers the scope asks for; the effective view
// leaves out disabled and overridden skills.
func (f *fakeSkills) ListSkills(_ context.Context, req *baagentv1.ListSkillsRequest) (*baagentv1.ListSkillsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	t, p, scope := req.GetTenant(), req.GetProject(), req.GetScope()
	var out []*baagentv1.SkillMetadata
	if scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL ||
		scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED {
		for _, n := range f.system {
			m := f.systemMeta(t, p, n)
			if scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED && (m.GetIsDisabled() || m.GetIsOverridden()) {
				continue
			}
			out = append(out, m)
		}
	}
	every := scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED
	withTenant := every || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_TENANT
	withProject := p != "" && (every || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT)
	for key, s := range f.stored {
		if (withTenant && key == skillKey(t, "", s.meta.GetName())) || (withProject && key == skillKey(t, p, s.meta.GetName())) {
			out = append(out, s.meta)
		}
	}
	return &baagentv1.ListSkillsResponse{Skills: out}, nil
}

func (f *fakeSkills) GetSkill(_ context.Context, req *baagentv1.GetSkillRequest) (*baagentv1.GetSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, layer := range []string{req.GetProject(), ""} {
		if s := f.stored[skillKey(req.GetTenant(), layer, req.GetName())]; s != nil {
			return &baagentv1.GetSkillResponse{Metadata: s.meta, Body: string(s.content)}, nil
		}
	}
	for _, n := range f.system {
		if n == req.GetName() {
			return &baagentv1.GetSkillResponse{Metadata: f.systemMeta(req.GetTenant(), req.GetProject(), n)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "skill %q not found for tenant %q", req.GetName(), req.GetTenant())
}

// lastPut is the most recent PutSkill request the fake received.
func (f *fakeSkills) lastPut() *baagentv1.PutSkillRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.puts) == 0 {
		return nil
	}
	return f.puts[len(f.puts)-1]
}

func (f *fakeSkills) setOff(off bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off = off
}
