package browser

import (
	"context"
	"testing"
)

// PLACEHOLDER on the console-pages branch: the skills page's helper replaces
// this file. It must never reach main.

var skillsShots = []string{}

func seedSkills(ctx context.Context, t *testing.T, s *pagesSuite) []string { return nil }
