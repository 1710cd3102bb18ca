package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// fakeSkills is a SkillsService that implements the documented activation
// rule (docs/concepts/skills.md) over skills held in memory, so that the
// orchestrator's side is tested whichever rule the real service has:
// activating the innermost skill is a no-op (already_active); a skill
// nests in the innermost active skill whose instructions name it, and the
// skills above that one end (siblings); a skill already on the resulting
// chain is a cycle; at most three nest; a MODEL activation of a skill with
// disable_model_invocation is refused; a request for a kept revision gets
// it. ReadSkillResource pages by bytes, or by numbered lines when asked
// (as the skills service documents). MatchTriggers finds `/name` and trigger phrases, or answers
// Unimplemented when noTriggers is set.
type fakeSkills struct {
	baagentv1.UnimplementedSkillsServiceServer

	mu         sync.Mutex
	skills     map[string]*fakeSkill
	noTriggers bool
	activated  []*baagentv1.SkillActivationRequest
}

// fakeSkill is one revision of a skill; old revisions are kept.
type fakeSkill struct {
	instructions string
	revision     string
	allowed      []string // nil: no restriction
	userOnly     bool     // disable_model_invocation
	triggers     []string
	files        map[string]string
	old          map[string]*fakeSkill // earlier revisions
}

func newFakeSkills() *fakeSkills { return &fakeSkills{skills: map[string]*fakeSkill{}} }

// put adds or replaces a skill, keeping the replaced revision.
func (f *fakeSkills) put(name string, s *fakeSkill) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if prev := f.skills[name]; prev != nil {
		s.old = prev.old
		prev.old = nil
		if s.old == nil {
			s.old = map[string]*fakeSkill{}
		}
		s.old[prev.revision] = prev
	}
	f.skills[name] = s
}

// replace replaces a skill without keeping its earlier revisions (as a
// file skill edited on disk).
func (f *fakeSkills) replace(name string, s *fakeSkill) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skills[name] = s
}

func (f *fakeSkills) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.skills, name)
}

func (f *fakeSkills) requests() []*baagentv1.SkillActivationRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.activated)
}

// client serves f on loopback gRPC.
func (f *fakeSkills) client(t testing.TB) baagentv1.SkillsServiceClient {
	return baagentv1.NewSkillsServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterSkillsServiceServer(gs, f) }))
}

func (f *fakeSkills) GetCatalog(_ context.Context, _ *baagentv1.GetCatalogRequest) (*baagentv1.GetCatalogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	n := 0
	for _, name := range slices.Sorted(maps.Keys(f.skills)) {
		if f.skills[name].userOnly {
			continue
		}
		fmt.Fprintf(&b, "- %s: the %s skill\n", name, name)
		n++
	}
	return &baagentv1.GetCatalogResponse{Text: b.String(), SkillCount: int32(n)}, nil
}

func (f *fakeSkills) ActivateSkill(_ context.Context, req *baagentv1.ActivateSkillRequest) (*baagentv1.ActivateSkillResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := req.GetActivation()
	f.activated = append(f.activated, a)
	name, chain := a.GetSkillName(), a.GetActivationChain()
	sk := f.skills[name]
	if sk == nil {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", name)
	}
	if old := sk.old[a.GetRevision()]; old != nil {
		sk = old
	}
	refuse := func(msg string) (*baagentv1.ActivateSkillResponse, error) {
		return &baagentv1.ActivateSkillResponse{Result: &baagentv1.SkillActivationResult{SkillName: name, Error: msg}}, nil
	}
	if sk.userOnly && a.GetOrigin() == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL {
		return refuse(fmt.Sprintf("Skill %q can only be invoked by the user (/%s) or its triggers; the model may not activate it.", name, name))
	}
	if n := len(chain); n > 0 && chain[n-1] == name {
		return &baagentv1.ActivateSkillResponse{Result: &baagentv1.SkillActivationResult{
			Success: true, SkillName: name, AlreadyActive: true, ActivationChain: chain, Revision: sk.revision, Origin: a.GetOrigin(),
		}}, nil
	}
	parent := -1
	for i := len(chain) - 1; i >= 0; i-- {
		if p := f.skills[chain[i]]; p != nil && strings.Contains(p.instructions, name) {
			parent = i
			break
		}
	}
	kept := slices.Clone(chain[:parent+1])
	if slices.Contains(kept, name) {
		return refuse("Circular dependency detected: " + strings.Join(append(kept, name), " → "))
	}
	if len(kept) >= 3 {
		return refuse(fmt.Sprintf("Maximum skill activation depth (3) exceeded. Current stack: %s", strings.Join(kept, " → ")))
	}
	var ended []string
	for i := len(chain) - 1; i > parent; i-- {
		ended = append(ended, chain[i])
	}
	res := &baagentv1.SkillActivationResult{
		Success:         true,
		SkillName:       name,
		Messages:        []*baagentv1.SkillMessage{{Content: sk.instructions}},
		ActivationChain: append(kept, name),
		Ended:           ended,
		Revision:        sk.revision,
		Origin:          a.GetOrigin(),
		Scope:           baagentv1.SkillScope_SKILL_SCOPE_TENANT,
		ContextModifier: &baagentv1.ContextModifier{},
	}
	if sk.allowed != nil {
		res.ContextModifier.AllowedTools = &baagentv1.ToolAllowList{Names: sk.allowed}
	}
	return &baagentv1.ActivateSkillResponse{Result: res}, nil
}

func (f *fakeSkills) ReadSkillResource(_ context.Context, req *baagentv1.ReadSkillResourceRequest) (*baagentv1.ReadSkillResourceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sk := f.skills[req.GetSkillName()]
	if sk == nil {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", req.GetSkillName())
	}
	if old := sk.old[req.GetRevision()]; old != nil {
		sk = old
	}
	data, ok := sk.files[req.GetPath()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "resource %q not found in skill %q", req.GetPath(), req.GetSkillName())
	}
	if !utf8.ValidString(data) {
		return nil, status.Errorf(codes.FailedPrecondition, "resource %q of skill %q is binary; only text resources can be read", req.GetPath(), req.GetSkillName())
	}
	size := int64(len(data))
	if req.GetLines() {
		return fakeLinePage(data, req.GetLineOffset(), int(req.GetLineLimit()), sk.revision), nil
	}
	if req.GetOffset() > size {
		return nil, status.Errorf(codes.OutOfRange, "offset %d is past the end of resource %q (%d bytes)", req.GetOffset(), req.GetPath(), size)
	}
	end := min(size, req.GetOffset()+max(req.GetLimit(), 1))
	return &baagentv1.ReadSkillResourceResponse{Content: data[req.GetOffset():end], SizeBytes: size, NextOffset: end, Revision: sk.revision}, nil
}

// fakeLinePage answers a lines request as the skills service documents
// it: 1-based numbered lines (`%6d<TAB>`) from offset, lines over 2,000
// characters cut and marked, at most limit (≤ 0 or over 2,000: 2,000)
// lines and 50 KiB a page, and the hint of the toolrunner's file_read.
func fakeLinePage(data string, offset int64, limit int, revision string) *baagentv1.ReadSkillResourceResponse {
	const maxBytes, maxLines, maxLine = 50 * 1024, 2000, 2000
	if limit <= 0 || limit > maxLines {
		limit = maxLines
	}
	var lines []string
	if data != "" {
		lines = strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	}
	total := int64(len(lines))
	first := min(max(offset, 0), total)
	last := min(first+int64(limit), total)
	var b strings.Builder
	cut := false
	i := first
	for ; i < last; i++ {
		l := strings.TrimSuffix(lines[i], "\r")
		if r := []rune(l); len(r) > maxLine {
			l = string(r[:maxLine]) + "..."
		}
		line := fmt.Sprintf("%6d\t%s\n", i+1, l)
		if b.Len()+len(line) > maxBytes {
			cut = true
			break
		}
		b.WriteString(line)
	}
	resp := &baagentv1.ReadSkillResourceResponse{SizeBytes: int64(len(data)), NextOffset: int64(len(data)), Revision: revision, TotalLines: total}
	switch {
	case cut:
		fmt.Fprintf(&b, "\n(Output truncated at %d bytes. Use 'offset' parameter to read beyond line %d)", maxBytes, i)
	case i < total:
		fmt.Fprintf(&b, "\n(File has more lines. Use 'offset' parameter to read beyond line %d)", i)
	default:
		fmt.Fprintf(&b, "\n(End of file - total %d lines)", total)
	}
	if i < total {
		resp.Truncated, resp.NextLineOffset = true, i
	}
	resp.Content = b.String()
	return resp
}

func (f *fakeSkills) MatchTriggers(_ context.Context, req *baagentv1.MatchTriggersRequest) (*baagentv1.MatchTriggersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noTriggers {
		return nil, status.Error(codes.Unimplemented, "method MatchTriggers not implemented")
	}
	var explicit, phrases []*baagentv1.TriggerMatch
	text := strings.ToLower(req.GetText())
	for _, name := range slices.Sorted(maps.Keys(f.skills)) {
		if strings.Contains(text, "/"+name) {
			explicit = append(explicit, &baagentv1.TriggerMatch{SkillName: name, Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER, Matched: "/" + name})
			continue
		}
		for _, p := range f.skills[name].triggers {
			if strings.Contains(text, strings.ToLower(p)) {
				phrases = append(phrases, &baagentv1.TriggerMatch{SkillName: name, Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_TRIGGER, Matched: p})
				break
			}
		}
	}
	return &baagentv1.MatchTriggersResponse{Matches: append(explicit, phrases...)}, nil
}
