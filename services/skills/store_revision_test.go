package skills

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// TestStoredSkillLikeFileSkill: a stored skill goes through the rules of a
// file skill — lenient warnings, line paging, the revision rules of
// ActivateSkill and ReadSkillResource, disable-model-invocation — with its
// store revision as its revision.
func TestStoredSkillLikeFileSkill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	c := servedReplica(t, storeJS(t), root)

	// Lenient violations are warnings of the upload, as of a loaded folder.
	lenient, err := os.ReadFile(lenientFixture)
	if err != nil {
		t.Fatal(err)
	}
	put, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "pdf-forms", Content: lenient,
		Format: baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD})
	if err != nil || len(put.GetSkill().GetWarnings()) != 2 || put.GetSkill().GetSource() != baagentv1.SkillSource_SKILL_SOURCE_STORE {
		t.Fatalf("PutSkill(lenient) = %v, %v; want 2 warnings, source store", put, err)
	}

	v := func(desc, guide string) *baagentv1.PutSkillRequest {
		return &baagentv1.PutSkillRequest{Tenant: "acme", Name: "notes",
			Format:  baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_ZIP,
			Content: zipSkill(t, map[string]string{"SKILL.md": skillMD("notes", desc), "references/a.md": guide})}
	}
	p1, err := c.PutSkill(ctx, v("Take notes.", "one\ntwo\nthree\n"))
	if err != nil {
		t.Fatal(err)
	}
	rev1 := p1.GetSkill().GetRevision()
	testkit.Eventually(t, 10*time.Second, "the upload is served", func() bool {
		g, err := c.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "notes"})
		return err == nil && g.GetMetadata().GetRevision() == rev1
	})
	page, err := c.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "notes",
		Path: "references/a.md", Lines: true, LineLimit: 2})
	if err != nil || page.GetTotalLines() != 3 || !page.GetTruncated() || page.GetNextLineOffset() != 2 ||
		!strings.Contains(page.GetContent(), "two") || strings.Contains(page.GetContent(), "three") || page.GetRevision() != rev1 {
		t.Fatalf("line page = %v, %v", page, err)
	}

	p2, err := c.PutSkill(ctx, v("Take notes, v2.", "uno\n"))
	if err != nil {
		t.Fatal(err)
	}
	rev2 := p2.GetSkill().GetRevision()
	testkit.Eventually(t, 10*time.Second, "revision 2 is served", func() bool {
		g, err := c.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "notes"})
		return err == nil && g.GetMetadata().GetRevision() == rev2
	})
	// The kept revision 1 pages by lines too.
	old, err := c.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "notes",
		Path: "references/a.md", Revision: rev1, Lines: true, LineOffset: 2})
	if err != nil || !strings.Contains(old.GetContent(), "three") || old.GetRevision() != rev1 {
		t.Fatalf("line page of revision 1 = %v, %v", old, err)
	}
	// A revision that is not kept: the current one is activated, with a
	// note; reading its files is refused.
	act, err := c.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "notes", ActivationId: "a1", Tenant: "acme", Revision: "0123456789abcdef01234567"}})
	if err != nil || act.GetResult().GetRevision() != rev2 ||
		!strings.Contains(act.GetResult().GetMessages()[0].GetContent(), "is no longer available") {
		t.Fatalf("ActivateSkill(gone revision) = %v, %v", act, err)
	}
	_, err = c.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "notes",
		Path: "references/a.md", Revision: "0123456789abcdef01234567"})
	wantCode(t, "read at a gone revision", err, codes.FailedPrecondition)

	// disable-model-invocation holds for a stored skill.
	if _, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: "manual",
		Format:  baagentv1.SkillArchiveFormat_SKILL_ARCHIVE_FORMAT_SKILL_MD,
		Content: []byte(skillMD("manual", "Only on request.", "disable-model-invocation: true"))}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "manual is served", func() bool {
		_, err := c.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "acme", Name: "manual"})
		return err == nil
	})
	_, err = c.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "manual", ActivationId: "a2", Tenant: "acme"}})
	wantCode(t, "model activation of a user-only stored skill", err, codes.FailedPrecondition)
	user, err := c.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName: "manual", ActivationId: "a3", Tenant: "acme", Origin: baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER}})
	if err != nil || !user.GetResult().GetSuccess() {
		t.Fatalf("user activation = %v, %v", user, err)
	}
}
