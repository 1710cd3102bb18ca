package browser

import (
	"context"
	"testing"
)

// PLACEHOLDER on the console-pages branch: the activity page's helper replaces
// this file. It must never reach main.

var activityShots = []string{}

func seedActivity(ctx context.Context, t *testing.T, s *pagesSuite) []string { return nil }
