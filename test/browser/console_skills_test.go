package browser

import (
	"context"
	"testing"
)

// skillsShots are the Skills page's screenshots: the list with an
// override in place, the SKILL.md editor, a system skill's page, and the
// list at tablet width.
var skillsShots = []string{"skills.png", "skills-edit.png", "skills-detail.png", "skills-tablet.png"}

// seedSkills checks that the suite's skills service can store skills (the
// page's writes need it; without it the subtest is skipped, or fails with
// BAAGENT_REQUIRE_BROWSER=1) and names the shipped system skills the
// script disables and overrides. The script leaves the tenant as it found
// it: its uploads and overrides deleted, the system skill enabled.
func seedSkills(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	requireSkillStore(ctx, t, s.Base)
	return []string{"DISABLE_SKILL=data-quality-check", "OVERRIDE_SKILL=executive-summary"}
}
