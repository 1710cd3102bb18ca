package skills

import (
	"context"
	"fmt"
	"slices"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestStoredSkillReadYourWrites: a replica that answered a write lists it
// at once, with no waiting: upload, disable a system skill, enable it and
// delete, each followed immediately by a listing on the same replica.
func TestStoredSkillReadYourWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	addSkill(t, root, "", "sys-a", "System skill A.")
	js := storeJS(t)
	c := servedReplica(t, js, root)
	disabled := func() bool {
		resp, err := c.ListSkills(ctx, &baagentv1.ListSkillsRequest{Tenant: "acme", Scope: baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_SYSTEM})
		if err != nil {
			t.Fatalf("ListSkills(system): %v", err)
		}
		for _, md := range resp.GetSkills() {
			if md.GetName() == "sys-a" {
				return md.GetIsDisabled()
			}
		}
		t.Fatalf("sys-a missing from the system listing")
		return false
	}
	for round := range 10 {
		name := fmt.Sprintf("ryw-%d", round)
		if _, err := c.PutSkill(ctx, &baagentv1.PutSkillRequest{Tenant: "acme", Name: name,
			Content: zipSkill(t, map[string]string{name + "/SKILL.md": skillMD(name, "Round skill.")})}); err != nil {
			t.Fatalf("round %d: PutSkill: %v", round, err)
		}
		if names := listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}); !slices.Contains(names, name) {
			t.Fatalf("round %d: the listing right after the upload lacks %s: %v", round, name, names)
		}
		if _, err := c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "sys-a", Disabled: true}); err != nil {
			t.Fatalf("round %d: disable: %v", round, err)
		}
		if !disabled() {
			t.Fatalf("round %d: sys-a not disabled right after disabling it", round)
		}
		if names := listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}); slices.Contains(names, "sys-a") {
			t.Fatalf("round %d: sys-a still effective right after disabling it: %v", round, names)
		}
		if _, err := c.SetSystemSkillState(ctx, &baagentv1.SetSystemSkillStateRequest{Tenant: "acme", Name: "sys-a"}); err != nil {
			t.Fatalf("round %d: enable: %v", round, err)
		}
		if _, err := c.DeleteSkill(ctx, &baagentv1.DeleteSkillRequest{Tenant: "acme", Name: name}); err != nil {
			t.Fatalf("round %d: DeleteSkill: %v", round, err)
		}
		if disabled() {
			t.Fatalf("round %d: sys-a still disabled right after enabling it", round)
		}
		if names := listNames(t, c, &baagentv1.ListSkillsRequest{Tenant: "acme"}); slices.Contains(names, name) || !slices.Contains(names, "sys-a") {
			t.Fatalf("round %d: the listing right after enable+delete = %v", round, names)
		}
	}
}
