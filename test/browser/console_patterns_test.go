package browser

import (
	"context"
	"testing"
)

// PLACEHOLDER on the console-pages branch: the patterns page's helper replaces
// this file. It must never reach main.

var patternsShots = []string{}

func seedPatterns(ctx context.Context, t *testing.T, s *pagesSuite) []string { return nil }
