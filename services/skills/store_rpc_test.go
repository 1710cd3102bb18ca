package skills

import (
	"archive/zip"
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/natstest"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/skills/store"
)

// storeJS starts an embedded NATS for one test.
func storeJS(t testing.TB) jetstream.JetStream {
	t.Helper()
	srv := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, srv.ClientURL(), t.Name())
	return js
}

// servedReplica is one skills replica: a Server on root with its own
// store on js, running, served over loopback gRPC.
func servedReplica(t *testing.T, js jetstream.JetStream, root string) baagentv1.SkillsServiceClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, js, store.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	s := newTestServer(t, root, func(o *Options) { o.Store = st; o.PollInterval = time.Hour })
	testkit.Run(t, context.Background(), s.Run)
	return baagentv1.NewSkillsServiceClient(vt.Serve(t, s.Register))
}

func zipSkill(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: err = %v, want %v", what, err, code)
	}
}

func listNames(t *testing.T, c baagentv1.SkillsServiceClient, req *baagentv1.ListSkillsRequest) []string {
	t.Helper()
	resp, err := c.ListSkills(context.Background(), req)
	if err != nil {
		t.Fatalf("ListSkills: %v", err)
	}
	return skillNames(resp.GetSkills())
}

// TestStoredSkillTwoReplicas: an upload to one replica is listed, read and
// activated on another; a replace keeps the previous revision readable; a
// delete removes it everywhere; another tenant never sees it.
func TestStoredSkillTwoReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	addSkill(t, root, "", "sys-a", "System skill A.")
	addSkill(t, root, "", "sys-b", "System skill B.")
	js := storeJS(t)
	a := servedReplica(t, js, root)
	b := servedReplica(t, js, root)

	put, err := a.PutSkill(ctx, &baagentv1.PutSkillRequest{
		Tenant: "acme", Name: "report", IfNoneMatch: true,
		Content: zipSkill(t, map[string]string{
			"report/SKILL.md":            skillMD("report", "Write the report."),
			"report/references/guide.md": "guide v1",
		}),
	})
	if err != nil {
		t.Fatalf("PutSkill: %v", err)
	}
	md := put.GetSkill()
	if put.GetReplaced() || md.GetSource() != baagentv1.SkillSource_SKILL_SOURCE_STORE || md.GetRevision() == "" ||
		md.GetScope() != baagentv1.SkillScope_SKILL_SCOPE_TENANT || !slices.Equal(md.GetResources(), []string{"references/guide.md"}) {
		t.Fatalf("PutSkill = %v", put)
	}
	rev1 := md.GetRevision()
	testkit.Eventually(t, 10*time.Second, "replica b lists the upload", func() bool {
		return slices.Contains(listNames(t, b, &baagentv1.ListSkillsRequest{Tenant: "acme"}), "report")
	})
	got, err := b.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "report", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES})
	if err != nil || got.GetMetadata().GetRevision() != rev1 || len(got.GetResources()) != 1 || got.GetResources()[0].GetContent() != "guide v1" {
		t.Fatalf("GetSkill on b = %v, %v", got, err)
	}
	act, err := b.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "report", ActivationId: "act-1", Tenant: "acme"}})
	if err != nil || act.GetResult().GetRevision() != rev1 || act.GetResult().GetScope() != baagentv1.SkillScope_SKILL_SCOPE_TENANT {
		t.Fatalf("ActivateSkill on b = %v, %v", act, err)
	}
	if names := listNames(t, b, &baagentv1.ListSkillsRequest{Tenant: "other"}); slices.Contains(names, "report") {
		t.Errorf("tenant other sees acme's skill: %v", names)
	}
	wantCode(t, "other tenant GetSkill", func() error {
		_, err := b.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "other", Name: "report"})
		return err
	}(), codes.NotFound)

	// Replace, with the right and a wrong If-Match.
	v2 := &baagentv1.PutSkillRequest{Tenant: "acme", Name: "report", IfMatch: "0000",
		Format: baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
		Content: zipSkill(t, map[string]string{
			"SKILL.md":            skillMD("report", "Write the report, v2."),
			"references/guide.md": "guide v2",
		})}
	_, err = a.PutSkill(ctx, v2)
	wantCode(t, "stale If-Match", err, codes.Aborted)
	v2.IfMatch = rev1
	put2, err := a.PutSkill(ctx, v2)
	if err != nil || !put2.GetReplaced() || put2.GetSkill().GetRevision() == rev1 {
		t.Fatalf("replace = %v, %v", put2, err)
	}
	rev2 := put2.GetSkill().GetRevision()
	testkit.Eventually(t, 10*time.Second, "replica b has revision 2", func() bool {
		g, err := b.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "report"})
		return err == nil && g.GetMetadata().GetRevision() == rev2
	})
	old, err := b.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "report", Path: "references/guide.md", Revision: rev1})
	if err != nil || old.GetContent() != "guide v1" || old.GetRevision() != rev1 {
		t.Fatalf("ReadSkillResource(rev1) = %v, %v", old, err)
	}
	cur, err := b.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "report", Path: "references/guide.md"})
	if err != nil || cur.GetContent() != "guide v2" || cur.GetRevision() != rev2 {
		t.Fatalf("ReadSkillResource(current) = %v, %v", cur, err)
	}
	_, err = b.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "report", Path: "references/guide.md", Revision: "deadbeef"})
	wantCode(t, "unknown revision", err, codes.FailedPrecondition) // as for a file skill
	// An activation restored at revision 1 gets revision 1's instructions
	// and resources.
	restored, err := b.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "report", ActivationId: "act-2", Tenant: "acme", Revision: rev1,
		LoadLevel: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES}})
	if err != nil || restored.GetResult().GetRevision() != rev1 {
		t.Fatalf("ActivateSkill(rev1) = %v, %v", restored, err)
	}
	var text strings.Builder
	for _, m := range restored.GetResult().GetMessages() {
		text.WriteString(m.GetContent())
	}
	if !strings.Contains(text.String(), "guide v1") || !strings.Contains(text.String(), "Write the report.") || strings.Contains(text.String(), "v2") {
		t.Errorf("restored activation's messages = %q, want revision 1's", text.String())
	}

	// Delete.
	_, err = b.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "report", IfMatch: rev1})
	wantCode(t, "delete with a stale If-Match", err, codes.Aborted)
	del, err := b.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "report", IfMatch: rev2})
	if err != nil || del.GetRevision() != rev2 {
		t.Fatalf("DeleteSkill = %v, %v", del, err)
	}
	testkit.Eventually(t, 10*time.Second, "replica a drops the skill", func() bool {
		return !slices.Contains(listNames(t, a, &baagentv1.ListSkillsRequest{Tenant: "acme"}), "report")
	})
	_, err = a.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "report"})
	wantCode(t, "delete a deleted skill", err, codes.NotFound)
}

// TestStoredSkillLayers: scope filters, overrides of file skills, and
// system skills disabled for a tenant and a project.
func TestStoredSkillLayers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	addSkill(t, root, "", "sys-a", "System skill A.")
	addSkill(t, root, "", "sys-b", "System skill B.")
	addSkill(t, root, "tenants/acme", "tenant-file", "A file tenant skill.")
	c := servedReplica(t, storeJS(t), root)

	for _, r := range []*baagentv1.PutSkillRequest{
		{Tenant: "acme", Name: "sys-a", Content: []byte(skillMD("sys-a", "Acme's own sys-a."))},
		{Tenant: "acme", Name: "tenant-file", Content: []byte(skillMD("tenant-file", "Stored replaces the file skill."))},
		{Tenant: "acme", Project: "q3:plan", Name: "proj", Content: []byte(skillMD("proj", "A project skill."))},
	} {
		if _, err := c.PutSkill(ctx, r); err != nil {
			t.Fatalf("PutSkill %s: %v", r.GetName(), err)
		}
	}
	if _, err := c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Project: "q3:plan", Name: "sys-b", Disabled: true}); err != nil {
		t.Fatalf("SetSystemSkillState: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the project's view", func() bool {
		return slices.Equal(listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme", Project: "q3:plan"}), []string{"proj", "sys-a", "tenant-file"})
	})
	if got := listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}); !slices.Equal(got, []string{"sys-a", "sys-b", "tenant-file"}) {
		t.Errorf("tenant view = %v", got)
	}
	// The effective view marks the source.
	resp, err := c.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range resp.GetSkills() {
		want := baagentv1.SkillSource_SKILL_SOURCE_STORE
		if md.GetName() == "sys-b" {
			want = baagentv1.SkillSource_SKILL_SOURCE_FILES
		}
		if md.GetSource() != want {
			t.Errorf("%s source = %v, want %v", md.GetName(), md.GetSource(), want)
		}
	}
	_, err = c.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Project: "q3:plan", Name: "sys-b"})
	wantCode(t, "a system skill disabled for the project", err, codes.FailedPrecondition)

	all, err := c.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: "acme", Project: "q3:plan", Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_ALL})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name                 string
		scope                baagentv1.SkillScope
		source               baagentv1.SkillSource
		disabled, overridden bool
	}
	var rows []row
	for _, md := range all.GetSkills() {
		rows = append(rows, row{md.GetName(), md.GetScope(), md.GetSource(), md.GetIsDisabled(), md.GetIsOverridden()})
	}
	const (
		sys, ten, prj = baagentv1.SkillScope_SKILL_SCOPE_SYSTEM, baagentv1.SkillScope_SKILL_SCOPE_TENANT, baagentv1.SkillScope_SKILL_SCOPE_PROJECT
		fil, sto      = baagentv1.SkillSource_SKILL_SOURCE_FILES, baagentv1.SkillSource_SKILL_SOURCE_STORE
	)
	want := []row{
		{"sys-a", sys, fil, false, true},
		{"sys-b", sys, fil, true, false},
		{"sys-a", ten, sto, false, false},
		{"tenant-file", ten, sto, false, false},
		{"tenant-file", ten, fil, false, true},
		{"proj", prj, sto, false, false},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("ALL =\n%v\nwant\n%v", rows, want)
	}
	sysOnly := listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme", Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM})
	if !slices.Equal(sysOnly, []string{"sys-a", "sys-b"}) {
		t.Errorf("SYSTEM = %v", sysOnly)
	}
	_, err = c.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: "acme", Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_PROJECT})
	wantCode(t, "PROJECT scope without a project", err, codes.InvalidArgument)

	// Disable for the whole tenant, then enable again.
	st, err := c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "sys-b", Disabled: true})
	if err != nil || !st.GetSkill().GetIsDisabled() {
		t.Fatalf("disable = %v, %v", st, err)
	}
	testkit.Eventually(t, 10*time.Second, "sys-b disabled for the tenant", func() bool {
		return !slices.Contains(listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}), "sys-b")
	})
	if _, err := c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "sys-b"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "sys-b enabled again", func() bool {
		return slices.Contains(listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}), "sys-b")
	})
	_, err = c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "no-such", Disabled: true})
	wantCode(t, "unknown system skill", err, codes.NotFound)

	// Deleting the stored skill brings the file skill back.
	if _, err := c.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "tenant-file"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the file skill is back", func() bool {
		g, err := c.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "tenant-file"})
		return err == nil && g.GetMetadata().GetSource() == baagentv1.SkillSource_SKILL_SOURCE_FILES
	})
}

// TestPutSkillRefusals: bad uploads are InvalidArgument naming what is
// wrong; preconditions are Aborted.
func TestPutSkillRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := servedReplica(t, storeJS(t), t.TempDir())
	ok := []byte(skillMD("demo", "Demo."))
	for _, tc := range []struct {
		name string
		req  *baagentv1.PutSkillRequest
		code codes.Code
	}{
		{"no tenant", &baagentv1.PutSkillRequest{Name: "demo", Content: ok}, codes.InvalidArgument},
		{"bad name", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "Demo", Content: ok}, codes.InvalidArgument},
		{"no content", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo"}, codes.InvalidArgument},
		{"both preconditions", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: ok, IfMatch: "a", IfNoneMatch: true}, codes.InvalidArgument},
		{"name differs from SKILL.md", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "other", Content: ok}, codes.InvalidArgument},
		{"invalid SKILL.md", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: []byte("no front matter")}, codes.InvalidArgument},
		{"traversal", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: zipSkill(t, map[string]string{"SKILL.md": string(ok), "../x": "x"})}, codes.InvalidArgument},
		{"too deep", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: zipSkill(t, map[string]string{"SKILL.md": string(ok), "a/b/c/d/e/f": "x"})}, codes.InvalidArgument},
		{"If-Match on a missing skill", &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: ok, IfMatch: "abc"}, codes.Aborted},
	} {
		_, err := c.PutSkill(ctx, tc.req)
		wantCode(t, tc.name, err, tc.code)
	}
	if _, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: ok}); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "demo", Content: ok, IfNoneMatch: true})
	wantCode(t, "If-None-Match on an existing skill", err, codes.Aborted)
	_, err = c.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "BAD"})
	wantCode(t, "delete with a bad name", err, codes.InvalidArgument)
}

// TestStoreOff: without a store the three RPCs are Unimplemented.
func TestStoreOff(t *testing.T) {
	t.Parallel()
	_, c := serveExamples(t)
	ctx := context.Background()
	_, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "x", Content: []byte("x")})
	wantCode(t, "PutSkill", err, codes.Unimplemented)
	_, err = c.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: "x"})
	wantCode(t, "DeleteSkill", err, codes.Unimplemented)
	_, err = c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "x"})
	wantCode(t, "SetSystemSkillState", err, codes.Unimplemented)
}
