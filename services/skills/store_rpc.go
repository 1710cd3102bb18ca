package skills

import (
	"context"
	"errors"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/skills/store"
)

// maxRevisionLen bounds the revision fields of requests (a store revision
// is 24 hex digits; file revisions are hashes too).
const maxRevisionLen = 128

// publishLocked swaps in files combined with the store's current view, and
// remembers files for the next store change. reloadMu must be held.
func (s *Server) publishLocked(files *snapshot) {
	s.files.Store(files)
	var v *store.View
	if s.store != nil {
		v = s.store.View()
	}
	snap, parsed := combine(files, s.store, v, s.parsed)
	s.parsed = parsed
	if v != nil {
		snap.storeGen = v.Gen
	}
	if prev := s.snap.Load(); prev != nil {
		snap.gen = max(snap.gen, prev.gen+1)
	}
	s.snap.Store(snap)
}

// storeChanged re-merges the current files with the store's new view.
func (s *Server) storeChanged() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if files := s.files.Load(); files != nil {
		s.publishLocked(files)
	}
}

// catchUp re-merges the store's view when the published snapshot is older
// than it, so that a write answers only once this replica lists it
// (read-your-writes; the store's write waited for its watch already).
func (s *Server) catchUp() {
	if v := s.store.View(); v != nil {
		if snap := s.snap.Load(); snap == nil || snap.storeGen < v.Gen {
			s.storeChanged()
		}
	}
}

// runStore runs the store's watch in a goroutine owned by Run and returns
// the channel of its changes (nil without a store) and a function that
// stops it and waits for it.
func (s *Server) runStore(ctx context.Context) (<-chan struct{}, func()) {
	if s.store == nil {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.store.Run(ctx); err != nil {
			s.log.Error("skills: skill store stopped", "error", err)
		}
	})
	// Changes between New and Run are picked up now.
	s.storeChanged()
	return s.store.Changed(), func() { cancel(); wg.Wait() }
}

func (s *Server) storeOff(rpc string) error {
	return status.Errorf(codes.Unimplemented, "%s: the skill store is off on this server (setting skills-store)", rpc)
}

// storeError maps a store error to a status.
func storeError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrLimit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "skill store unavailable: %v", err)
}

func validateRevision(e *validate.Errors, field, v string) {
	if len(v) > maxRevisionLen || strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == ':')
	}) {
		e.Addf(field, "must be at most %d letters, digits, '-', '_' or ':' (a revision from a response)", maxRevisionLen)
	}
}

func validatePutSkill(req *baagentv1.PutSkillRequest) error {
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "name", req.GetName())
	switch n := len(req.GetContent()); {
	case n == 0:
		e.Add("content", "required")
	case n > store.MaxArchiveBytes:
		e.Addf("content", "must be at most %d bytes, got %d", store.MaxArchiveBytes, n)
	}
	validate.Enum(&e, "format", req.GetFormat(), baagentv1.SkillArchiveFormat_name, true)
	validateRevision(&e, "if_match", req.GetIfMatch())
	if req.GetIfMatch() != "" && req.GetIfNoneMatch() {
		e.Add("if_none_match", "must not be set together with if_match")
	}
	return e.Err()
}

// checkStoredFiles applies the file loader's limits on resources that an
// archive reader does not know: the loader lists files at most
// maxResourceDepth directories deep and maxResources of them.
func checkStoredFiles(files []store.File) error {
	var e validate.Errors
	if len(files)-1 > maxResources {
		e.Addf("content", "has %d resource files; a skill may have at most %d", len(files)-1, maxResources)
	}
	for _, f := range files {
		if strings.Count(f.Path, "/") > maxResourceDepth {
			e.Addf("content", "%q is nested more than %d directories deep", f.Path, maxResourceDepth)
			break
		}
	}
	return e.Err()
}

var archiveFormats = map[baagentv1.SkillArchiveFormat]store.Format{
	baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_UNSPECIFIED: store.FormatDetect,
	baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD:    store.FormatSkillMD,
	baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP:         store.FormatZip,
	baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR:         store.FormatTar,
	baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_TAR_GZ:      store.FormatTarGz,
}

// PutSkill validates an uploaded skill exactly as a skill folder is
// validated and stores it as the tenant's (or project's) skill. A stored
// skill replaces a file skill of the same name in its layer, as a tenant
// skill replaces a system skill.
func (s *Server) PutSkill(ctx context.Context, req *baagentv1.PutSkillRequest) (*baagentv1.PutSkillResponse, error) {
	if s.store == nil {
		return nil, s.storeOff("PutSkill")
	}
	if err := validatePutSkill(req); err != nil {
		return nil, s.rejected(ctx, "PutSkill", err)
	}
	files, err := store.ReadArchive(req.GetContent(), archiveFormats[req.GetFormat()])
	if err != nil {
		var e validate.Errors
		e.Add("content", err.Error())
		return nil, s.rejected(ctx, "PutSkill", e.Err())
	}
	if err := checkStoredFiles(files); err != nil {
		return nil, s.rejected(ctx, "PutSkill", err)
	}
	var md []byte
	for _, f := range files {
		if f.Path == store.SkillFile {
			md = f.Data
		}
	}
	sk, err := parseSkillMD(md, req.GetName())
	if err != nil {
		var e validate.Errors
		e.Add("content", store.SkillFile+": "+err.Error())
		return nil, s.rejected(ctx, "PutSkill", e.Err())
	}
	k := store.Key{Tenant: req.GetTenant(), Project: req.GetProject(), Name: req.GetName()}
	m, replaced, err := s.store.Put(ctx, k, files, store.PutOptions{IfMatch: req.GetIfMatch(), IfNoneMatch: req.GetIfNoneMatch()})
	if err != nil {
		return nil, storeError(err)
	}
	s.catchUp()
	finishStored(sk, s.store, m, storedScope(k.Project))
	// metadataProto carries the lenient parser's warnings: the uploader
	// learns of them now, not from a log.
	return &baagentv1.PutSkillResponse{Skill: sk.metadataProto(), Replaced: replaced}, nil
}

// DeleteSkill deletes a stored skill. A file skill of the same name, if
// any, is in service again; file skills themselves cannot be deleted
// through the API.
func (s *Server) DeleteSkill(ctx context.Context, req *baagentv1.DeleteSkillRequest) (*baagentv1.DeleteSkillResponse, error) {
	if s.store == nil {
		return nil, s.storeOff("DeleteSkill")
	}
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "name", req.GetName())
	validateRevision(&e, "if_match", req.GetIfMatch())
	if err := e.Err(); err != nil {
		return nil, s.rejected(ctx, "DeleteSkill", err)
	}
	rev, err := s.store.Delete(ctx, store.Key{Tenant: req.GetTenant(), Project: req.GetProject(), Name: req.GetName()}, req.GetIfMatch())
	if err != nil {
		return nil, storeError(err)
	}
	s.catchUp()
	return &baagentv1.DeleteSkillResponse{Revision: rev}, nil
}

// SetSystemSkillState disables or enables a system skill for a tenant or
// one of its projects. A skill the operator disabled in tenant.yaml stays
// disabled whatever the API says: the response's is_disabled is the
// effective state.
func (s *Server) SetSystemSkillState(ctx context.Context, req *baagentv1.SetSystemSkillStateRequest) (*baagentv1.SetSystemSkillStateResponse, error) {
	if s.store == nil {
		return nil, s.storeOff("SetSystemSkillState")
	}
	var e validate.Errors
	validate.Tenant(&e, "tenant", req.GetTenant())
	validate.Optional(&e, "project", req.GetProject(), validate.ID)
	validate.SkillName(&e, "name", req.GetName())
	if err := e.Err(); err != nil {
		return nil, s.rejected(ctx, "SetSystemSkillState", err)
	}
	snap := s.snap.Load()
	sk := snap.system.skills[req.GetName()]
	if sk == nil {
		return nil, status.Errorf(codes.NotFound, "system skill %q not found", req.GetName())
	}
	sc := store.Scope{Tenant: req.GetTenant(), Project: req.GetProject()}
	if err := s.store.SetDisabled(ctx, sc, req.GetName(), req.GetDisabled()); err != nil {
		return nil, storeError(err)
	}
	s.catchUp()
	md := sk.metadataProto()
	md.IsDisabled = req.GetDisabled()
	if t := s.files.Load().tenants[req.GetTenant()]; t != nil {
		if hidden, _ := t.rules.hides(req.GetName()); hidden {
			md.IsDisabled = true
		}
	}
	return &baagentv1.SetSystemSkillStateResponse{Skill: md}, nil
}

// listLayers answers ListSkills with a scope filter: the skills of the
// layers asked for, each marked is_disabled (a system skill hidden from the
// tenant or project) and is_overridden (a skill a higher layer replaces).
// Layers are listed system, tenant, project, each ordered by name.
func (s *snapshot) listLayers(tenant, project string, filter baagentv1.SkillScopeFilter) []*baagentv1.SkillMetadata {
	t := s.tenants[tenant]
	var p *layer
	if t != nil && project != "" {
		p = t.projects[project]
	}
	inTenant := func(n string) bool { return t != nil && t.skills[n] != nil }
	inProject := func(n string) bool { return p != nil && p.skills[n] != nil }
	var out []*baagentv1.SkillMetadata
	add := func(sk *skill, disabled, overridden bool) {
		md := sk.metadataProto()
		md.IsDisabled, md.IsOverridden = disabled, overridden
		out = append(out, md)
	}
	shadowed := func(sc store.Scope) {
		if s.stored == nil {
			return
		}
		for _, sk := range s.stored.shadowed[sc] {
			add(sk, false, true)
		}
	}
	all := filter == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL
	if all || filter == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM {
		for _, sk := range s.system.sorted {
			disabled := false
			if t != nil {
				disabled, _ = t.rules.hides(sk.name)
				disabled = disabled && !inTenant(sk.name) // an override is not a disabling
			}
			if p != nil && p.disabledSystem[sk.name] {
				disabled = true
			}
			add(sk, disabled, inTenant(sk.name) || inProject(sk.name))
		}
	}
	if t != nil && (all || filter == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_TENANT) {
		for _, sk := range t.sorted {
			add(sk, false, inProject(sk.name))
		}
		shadowed(store.Scope{Tenant: tenant})
	}
	if p != nil && (all || filter == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT) {
		for _, sk := range p.sorted {
			add(sk, false, false)
		}
		shadowed(store.Scope{Tenant: tenant, Project: project})
	}
	return out
}
