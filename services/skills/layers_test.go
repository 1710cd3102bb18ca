package skills

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// layeredRoot builds a skills root with three tenants:
//
//	system: alpha beta gamma, and "broken" (invalid)
//	acme: disables gamma, overrides beta with its own; acme-only; an invalid
//	  skill of its own; project p1 replaces alpha and adds p1-only
//	globex: overrides alpha without a replacement; globex-only
//	initech: an invalid tenant.yaml; initech-only
func layeredRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	addSkill(t, root, "", "alpha", "System alpha.")
	addSkill(t, root, "", "beta", "System beta.")
	addSkill(t, root, "", "gamma", "System gamma.")
	writeFile(t, root, "broken/SKILL.md", skillMD("not-broken", "Name differs from the folder."))

	writeFile(t, root, "tenants/acme/tenant.yaml", "disabled_skills: [gamma]\noverridden_skills: [beta]\n")
	addSkill(t, root, "tenants/acme", "beta", "Acme's beta.")
	addSkill(t, root, "tenants/acme", "acme-only", "Acme's own skill.")
	writeFile(t, root, "tenants/acme/acme-secret-broken/SKILL.md", "no front matter")
	addSkill(t, root, "tenants/acme/projects/p1", "alpha", "Project p1's alpha.")
	addSkill(t, root, "tenants/acme/projects/p1", "p1-only", "Only in project p1.")

	writeFile(t, root, "tenants/globex/tenant.yaml", "overridden_skills: [alpha]\n")
	addSkill(t, root, "tenants/globex", "globex-only", "Globex's own skill.")

	writeFile(t, root, "tenants/initech/tenant.yaml", "disabled_skills: gamma\n")
	addSkill(t, root, "tenants/initech", "initech-only", "Initech's own skill.")

	// Not a valid tenant name: never loaded, never reachable.
	addSkill(t, root, "tenants/bad.name", "hidden", "Unreachable.")
	return root
}

type listed struct{ name, scope, description string }

func list(t *testing.T, s *Server, tenant, project string) ([]listed, []*baagentv1.SkillLoadError) {
	t.Helper()
	resp, err := s.ListSkills(context.Background(), &baagentv1.ListSkillsRequest{Tenant: tenant, Project: project, IncludeInvalid: true})
	if err != nil {
		t.Fatalf("ListSkills(%s/%s): %v", tenant, project, err)
	}
	var out []listed
	for _, m := range resp.GetSkills() {
		out = append(out, listed{m.GetName(), scopeName(m.GetScope()), m.GetDescription()})
	}
	return out, resp.GetInvalid()
}

func TestLayeringAndTenantIsolation(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, layeredRoot(t))
	cases := []struct {
		tenant, project string
		want            []listed
	}{
		{"nobody", "", []listed{{"alpha", "system", "System alpha."}, {"beta", "system", "System beta."}, {"gamma", "system", "System gamma."}}},
		{"acme", "", []listed{{"acme-only", "tenant", "Acme's own skill."}, {"alpha", "system", "System alpha."}, {"beta", "tenant", "Acme's beta."}}},
		{"acme", "p1", []listed{{"acme-only", "tenant", "Acme's own skill."}, {"alpha", "project", "Project p1's alpha."}, {"beta", "tenant", "Acme's beta."}, {"p1-only", "project", "Only in project p1."}}},
		{"acme", "p2", []listed{{"acme-only", "tenant", "Acme's own skill."}, {"alpha", "system", "System alpha."}, {"beta", "tenant", "Acme's beta."}}},
		{"globex", "", []listed{{"beta", "system", "System beta."}, {"gamma", "system", "System gamma."}, {"globex-only", "tenant", "Globex's own skill."}}},
		{"globex", "p1", []listed{{"beta", "system", "System beta."}, {"gamma", "system", "System gamma."}, {"globex-only", "tenant", "Globex's own skill."}}},
		{"initech", "", []listed{{"initech-only", "tenant", "Initech's own skill."}}},
	}
	for _, c := range cases {
		got, _ := list(t, s, c.tenant, c.project)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s/%s:\n got  %v\n want %v", c.tenant, c.project, got, c.want)
		}
	}
}

func TestInvalidSkillsAreReportedToTheirTenantOnly(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, layeredRoot(t))
	folders := func(errs []*baagentv1.SkillLoadError) []string {
		var out []string
		for _, e := range errs {
			out = append(out, scopeName(e.GetScope())+":"+e.GetFolder())
		}
		return out
	}
	_, inv := list(t, s, "nobody", "")
	if got := folders(inv); !slices.Equal(got, []string{"system:broken"}) {
		t.Errorf("nobody sees invalid %v", got)
	}
	if !strings.Contains(inv[0].GetReason(), `name: "not-broken" must equal the skill's folder name "broken"`) {
		t.Errorf("reason %q", inv[0].GetReason())
	}
	_, inv = list(t, s, "acme", "")
	if got := folders(inv); !slices.Equal(got, []string{"system:broken", "tenant:acme-secret-broken"}) {
		t.Errorf("acme sees invalid %v", got)
	}
	_, inv = list(t, s, "globex", "")
	got := folders(inv)
	if !slices.Equal(got, []string{"system:broken", "tenant:alpha"}) {
		t.Errorf("globex sees invalid %v", got)
	}
	if !strings.Contains(inv[1].GetReason(), `overrides system skill "alpha" but the tenant has no valid skill of that name`) {
		t.Errorf("override without replacement: %q", inv[1].GetReason())
	}
	_, inv = list(t, s, "initech", "")
	if len(inv) != 2 || inv[1].GetFolder() != TenantConfigFile || !strings.Contains(inv[1].GetReason(), "system skills are hidden from this tenant until it is fixed") {
		t.Errorf("initech invalid = %v", inv)
	}

	// Without the flag, no invalid list.
	resp, err := s.ListSkills(context.Background(), &baagentv1.ListSkillsRequest{Tenant: "acme"})
	if err != nil || resp.GetInvalid() != nil {
		t.Errorf("ListSkills without include_invalid: %v, %v", resp.GetInvalid(), err)
	}
}

func TestResolveDisableOverrideAndIsolation(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, layeredRoot(t))
	get := func(tenant, project, name string) (*baagentv1.GetSkillResponse, error) {
		return s.GetSkill(context.Background(), &baagentv1.GetSkillRequest{Tenant: tenant, Project: project, Name: name,
			Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS})
	}
	ok := []struct{ tenant, project, name, scope, body string }{
		{"acme", "", "beta", "tenant", "Instructions of beta."},
		{"acme", "p1", "alpha", "project", "Instructions of alpha."},
		{"acme", "", "alpha", "system", "Instructions of alpha."},
		{"nobody", "", "gamma", "system", "Instructions of gamma."},
	}
	for _, c := range ok {
		resp, err := get(c.tenant, c.project, c.name)
		if err != nil {
			t.Errorf("%s/%s %s: %v", c.tenant, c.project, c.name, err)
			continue
		}
		if scopeName(resp.GetMetadata().GetScope()) != c.scope || !strings.Contains(resp.GetBody(), c.body) {
			t.Errorf("%s/%s %s: scope %v body %q", c.tenant, c.project, c.name, resp.GetMetadata().GetScope(), resp.GetBody())
		}
		if resp.GetMetadata().GetIsSystemSkill() != (c.scope == "system") {
			t.Errorf("%s: is_system_skill = %v", c.name, resp.GetMetadata().GetIsSystemSkill())
		}
	}
	refused := []struct {
		tenant, project, name string
		code                  codes.Code
		msg                   string
	}{
		{"acme", "", "gamma", codes.FailedPrecondition, `skill "gamma" is not available to tenant "acme": disabled by tenant.yaml (disabled_skills)`},
		{"acme", "p1", "gamma", codes.FailedPrecondition, "disabled by tenant.yaml"},
		{"globex", "", "alpha", codes.FailedPrecondition, "overridden by tenant.yaml (overridden_skills) but the tenant has no valid skill of that name"},
		{"initech", "", "alpha", codes.FailedPrecondition, "tenant.yaml is invalid"},
		{"nobody", "", "broken", codes.FailedPrecondition, `skill "broken" (system layer) failed validation: name: "not-broken" must equal`},
		{"acme", "", "acme-secret-broken", codes.FailedPrecondition, "(tenant layer) failed validation: SKILL.md: must start with"},
		// Isolation: one tenant's skills and errors do not exist for another.
		{"globex", "", "acme-only", codes.NotFound, `skill "acme-only" not found for tenant "globex"`},
		{"globex", "", "acme-secret-broken", codes.NotFound, "not found"},
		{"globex", "p1", "p1-only", codes.NotFound, `not found for tenant "globex", project "p1"`},
		{"acme", "", "p1-only", codes.NotFound, "not found"},
		{"nobody", "", "hidden", codes.NotFound, "not found"},
	}
	for _, c := range refused {
		_, err := get(c.tenant, c.project, c.name)
		st := status.Convert(err)
		if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
			t.Errorf("%s/%s %s: %v, want %v %q", c.tenant, c.project, c.name, err, c.code, c.msg)
		}
	}
}

// TestTenantOverrideWithBrokenReplacementFailsClosed: with the name in
// overridden_skills, a broken tenant replacement never falls back to the
// system skill; without it, the system skill stays in use.
func TestTenantOverrideWithBrokenReplacementFailsClosed(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "report", "System report.")
	writeFile(t, root, "tenants/a/tenant.yaml", "overridden_skills: [report]\n")
	writeFile(t, root, "tenants/a/report/SKILL.md", fm("name: report"))
	writeFile(t, root, "tenants/b/report/SKILL.md", fm("name: report"))
	s := newTestServer(t, root)

	got, inv := list(t, s, "a", "")
	if len(got) != 0 || len(inv) != 2 {
		t.Errorf("tenant a: skills %v invalid %v", got, inv)
	}
	got, inv = list(t, s, "b", "")
	if !slices.Equal(got, []listed{{"report", "system", "System report."}}) || len(inv) != 1 {
		t.Errorf("tenant b: skills %v invalid %v", got, inv)
	}
}

func TestSymlinkedFoldersStayInsideTheRoot(t *testing.T) {
	t.Parallel()

	outside := t.TempDir()
	addSkill(t, outside, "", "outsider", "Lives outside the root.")
	root := t.TempDir()
	addSkill(t, root, "", "real", "A real skill.")
	symlink(t, "real", root+"/alias")                 // inside: a second name for the same folder
	symlink(t, outside+"/outsider", root+"/outsider") // a system skill outside the root
	symlink(t, outside, root+"/tenants")              // tenants/ outside the root
	s := newTestServer(t, root)
	got, inv := list(t, s, "t", "")
	names := make([]string, len(got))
	for i, g := range got {
		names[i] = g.name
	}
	if !slices.Equal(names, []string{"real"}) {
		t.Errorf("skills %v, want only real", names)
	}
	var reasons []string
	for _, e := range inv {
		reasons = append(reasons, e.GetFolder()+": "+e.GetReason())
	}
	want := []string{`alias: name: "real" must equal the skill's folder name "alias"`, "outsider: folder: leaves its folder (symbolic link or '..')"}
	if !slices.Equal(reasons, want) {
		t.Errorf("invalid:\n got  %q\n want %q", reasons, want)
	}
}

// TestRefusedSkillIsLoggedAndCounted: a refused skill is logged once with
// its reason (not again on an unchanged reload) and counted per layer.
func TestRefusedSkillIsLoggedAndCounted(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	addSkill(t, root, "", "good", "Good.")
	writeFile(t, root, "bad/SKILL.md", fm("name: bad"))
	writeFile(t, root, "tenants/acme/worse/SKILL.md", "nothing")
	var logs testkit.SyncBuffer
	reg := prometheus.NewRegistry()
	s := newTestServer(t, root, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		o.Registerer = reg
	})
	out := logs.String()
	for _, want := range []string{
		`"msg":"skills: skill refused","service":"baagent.v1.SkillsService","layer":"system","tenant":"","project":"","folder":"bad","reason":"description: required"`,
		`"layer":"tenant","tenant":"acme","project":"","folder":"worse","reason":"SKILL.md: must start with`,
		`"msg":"skills: loaded"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "skills: skill refused"); n != 2 {
		t.Errorf("refusals logged %d times after an unchanged reload, want 2", n)
	}
	for layer, want := range map[string]float64{"system": 1, "tenant": 1, "project": 0} {
		if got := testutil.ToFloat64(s.metrics.invalid.WithLabelValues(layer)); got != want {
			t.Errorf("baagent_skills_invalid{layer=%q} = %v, want %v", layer, got, want)
		}
	}
	if got := testutil.ToFloat64(s.metrics.loaded.WithLabelValues("system")); got != 1 {
		t.Errorf("baagent_skills_loaded{layer=system} = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("registry: %d metrics, %v", n, err)
	}
}
