package security

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
)

func writeSkill(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "references"), 0o750); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: " + name + "\ndescription: A test skill " + name + " used by the symlink escape test of the reliability suite.\n---\n# " + name + "\n\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestTenantSkillSymlinksCannotEscape: a tenant's skill files are
// untrusted. Symlinks in a tenant's skill pointing outside the skill (to
// another tenant's skill, to a file outside the skills root) are never
// followed when the skill's resources are read or listed.
func TestTenantSkillSymlinksCannotEscape(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "host-secret.txt")
	const hostSecret, acmeSecret = "HOSTSECRET-51", "ACMESECRET-77"
	if err := os.WriteFile(outside, []byte(hostSecret), 0o640); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, filepath.Join(root, "system-skill"), "system-skill", "A system skill.")
	acme := filepath.Join(root, "tenants", "acme", "acme-private")
	writeSkill(t, acme, "acme-private", "Acme only.")
	if err := os.WriteFile(filepath.Join(acme, "references", "secret.md"), []byte(acmeSecret), 0o640); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(root, "tenants", "evil", "leaky")
	writeSkill(t, evil, "leaky", "Reads references/host.md and references/acme.md.")
	links := map[string]string{
		"host.md":  outside,
		"acme.md":  filepath.Join("..", "..", "..", "acme", "acme-private", "references", "secret.md"),
		"acme-dir": filepath.Join("..", "..", "..", "acme", "acme-private", "references"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(evil, "references", name)); err != nil {
			t.Fatal(err)
		}
	}
	s := harnessStart(t, nil, "-skills-dir="+root)
	skills := baagentv1.NewSkillsServiceClient(s.Dial(t, config.TargetSkills))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The skill itself loads: the test is about its resources.
	got, err := skills.GetSkill(ctx, &baagentv1.GetSkillRequest{Tenant: "evil", Name: "leaky", Level: baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES})
	if err != nil {
		t.Fatalf("evil's skill does not load: %v", err)
	}
	if text := got.String(); strings.Contains(text, hostSecret) || strings.Contains(text, acmeSecret) {
		t.Errorf("GetSkill(RESOURCES) includes content behind a symlink: %.400s", text)
	}
	for _, p := range []string{"references/host.md", "references/acme.md", "references/acme-dir/secret.md"} {
		resp, err := skills.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "evil", SkillName: "leaky", Path: p})
		if err == nil {
			if text := resp.String(); strings.Contains(text, hostSecret) || strings.Contains(text, acmeSecret) {
				t.Errorf("ReadSkillResource(%s) followed the symlink out of the skill: %.200s", p, text)
			} else {
				t.Errorf("ReadSkillResource(%s) succeeded: %.200s", p, text)
			}
			continue
		}
		if c := status.Code(err); c == codes.Internal || c == codes.Unknown {
			t.Errorf("ReadSkillResource(%s): %v", p, err)
		}
	}
	// acme reads its own resource: the refusals above are the symlinks'.
	if resp, err := skills.ReadSkillResource(ctx, &baagentv1.ReadSkillResourceRequest{Tenant: "acme", SkillName: "acme-private", Path: "references/secret.md"}); err != nil || !strings.Contains(resp.String(), acmeSecret) {
		t.Fatalf("acme's own resource: %v %v", resp, err)
	}
}
