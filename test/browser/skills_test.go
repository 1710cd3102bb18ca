package browser

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway"
)

// TestSkillsDashboardInChromium drives the Skills section against the
// whole suite (-target=all): uploads go to the skills service's store.
// A suite whose skills service has no store (PutSkill answers 501) is
// skipped, or fails with BAAGENT_REQUIRE_BROWSER=1.
func TestSkillsDashboardInChromium(t *testing.T) {
	node := browserDeps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := startSuite(ctx, t)
	requireSkillStore(ctx, t, base)
	runSkillsScript(ctx, t, node, base, "sales-analysis")
}

// TestSkillsDashboardWithFakeStoreInChromium drives the Skills section
// against a gateway whose skills peer is an in-memory store with the
// skills service's contract, so that the page is checked whatever the
// suite's store does.
func TestSkillsDashboardWithFakeStoreInChromium(t *testing.T) {
	node := browserDeps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &memSkills{stored: map[string]*baagentv1.SkillMetadata{}, disabled: map[string]bool{}, system: []string{"sales-analysis", "sql-helper"}}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterSkillsServiceServer(gs, f) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := gateway.New(gateway.Options{
		Skills:       baagentv1.NewSkillsServiceClient(conn),
		APIKeys:      map[string]string{},
		HTTPListener: lis,
		Logger:       slog.New(slog.DiscardHandler),
	})
	runCtx, stop := context.WithCancel(ctx)
	testkit.Run(t, runCtx, srv.Run)
	t.Cleanup(stop)
	runSkillsScript(ctx, t, node, "http://"+lis.Addr().String(), "sales-analysis")
}

// requireSkillStore skips (or fails, with BAAGENT_REQUIRE_BROWSER=1) when
// the suite's skills service cannot store skills.
func requireSkillStore(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/skills/store-probe", strings.NewReader("x"))
	req.Header.Set("Content-Type", "text/markdown")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotImplemented {
		msg := "the suite's skills service has no skill store (PUT /v1/skills answers 501: " + strings.TrimSpace(string(body)) + ")"
		if os.Getenv(requireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

func runSkillsScript(ctx context.Context, t *testing.T, node, base, systemSkill string) {
	t.Helper()
	shots := artifactDir(t)
	runScript(ctx, t, node, "skills.mjs", "PASS skills", []string{
		"BAAGENT_URL=" + base,
		"SCREENSHOT_DIR=" + shots,
		"SYSTEM_SKILL=" + systemSkill,
	}, shots, "skills.png")
}

// memSkills is an in-memory SkillsService: system skills that a tenant
// may disable, stored tenant and project skills with a revision per write,
// and the store's codes (Aborted for a failed precondition, NotFound).
type memSkills struct {
	baagentv1.UnimplementedSkillsServiceServer
	mu       sync.Mutex
	system   []string
	stored   map[string]*baagentv1.SkillMetadata // tenant/project/name
	disabled map[string]bool                     // tenant/project/name
	rev      int
}

func memKey(tenant, project, name string) string { return tenant + "/" + project + "/" + name }

func (m *memSkills) PutSkill(_ context.Context, req *baagentv1.PutSkillRequest) (*baagentv1.PutSkillResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := memKey(req.GetTenant(), req.GetProject(), req.GetName())
	old := m.stored[key]
	switch {
	case req.GetIfNoneMatch() && old != nil:
		return nil, status.Errorf(codes.Aborted, "skill %q exists", req.GetName())
	case req.GetIfMatch() != "" && (old == nil || old.GetRevision() != req.GetIfMatch()):
		return nil, status.Errorf(codes.Aborted, "skill %q is not at revision %s", req.GetName(), req.GetIfMatch())
	}
	m.rev++
	scope := baagentv1.SkillScope_SKILL_SCOPE_TENANT
	if req.GetProject() != "" {
		scope = baagentv1.SkillScope_SKILL_SCOPE_PROJECT
	}
	meta := &baagentv1.SkillMetadata{Name: req.GetName(), Description: "uploaded", Scope: scope, Revision: "r" + strconv.Itoa(m.rev), Source: baagentv1.SkillSource_SKILL_SOURCE_STORE}
	m.stored[key] = meta
	return &baagentv1.PutSkillResponse{Skill: meta, Replaced: old != nil}, nil
}

func (m *memSkills) DeleteSkill(_ context.Context, req *baagentv1.DeleteSkillRequest) (*baagentv1.DeleteSkillResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := memKey(req.GetTenant(), req.GetProject(), req.GetName())
	old := m.stored[key]
	switch {
	case old == nil:
		return nil, status.Errorf(codes.NotFound, "skill %q not found", req.GetName())
	case req.GetIfMatch() != "" && old.GetRevision() != req.GetIfMatch():
		return nil, status.Errorf(codes.Aborted, "skill %q is not at revision %s", req.GetName(), req.GetIfMatch())
	}
	delete(m.stored, key)
	return &baagentv1.DeleteSkillResponse{Revision: old.GetRevision()}, nil
}

func (m *memSkills) SetSystemSkillState(_ context.Context, req *baagentv1.SetSystemSkillStateRequest) (*baagentv1.SetSystemSkillStateResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.system {
		if n == req.GetName() {
			m.disabled[memKey(req.GetTenant(), req.GetProject(), n)] = req.GetDisabled()
			return &baagentv1.SetSystemSkillStateResponse{Skill: m.systemMeta(req.GetTenant(), req.GetProject(), n)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no system skill %q", req.GetName())
}

func (m *memSkills) systemMeta(tenant, project, name string) *baagentv1.SkillMetadata {
	return &baagentv1.SkillMetadata{
		Name: name, Description: "system skill", Scope: baagentv1.SkillScope_SKILL_SCOPE_SYSTEM, Revision: "files-" + name,
		Source:       baagentv1.SkillSource_SKILL_SOURCE_FILES,
		IsDisabled:   m.disabled[memKey(tenant, "", name)] || (project != "" && m.disabled[memKey(tenant, project, name)]),
		IsOverridden: m.stored[memKey(tenant, "", name)] != nil || (project != "" && m.stored[memKey(tenant, project, name)] != nil),
	}
}

func (m *memSkills) ListSkills(_ context.Context, req *baagentv1.ListSkillsRequest) (*baagentv1.ListSkillsResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, p, scope := req.GetTenant(), req.GetProject(), req.GetScope()
	every := scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL
	effective := scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED
	var out []*baagentv1.SkillMetadata
	if every || effective || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM {
		for _, n := range m.system {
			meta := m.systemMeta(t, p, n)
			if effective && (meta.GetIsDisabled() || meta.GetIsOverridden()) {
				continue
			}
			out = append(out, meta)
		}
	}
	withTenant := every || effective || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_TENANT
	withProject := p != "" && (every || effective || scope == baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT)
	for key, meta := range m.stored {
		if (withTenant && key == memKey(t, "", meta.GetName())) || (withProject && key == memKey(t, p, meta.GetName())) {
			out = append(out, meta)
		}
	}
	return &baagentv1.ListSkillsResponse{Skills: out}, nil
}
