package browser

import (
	"context"
	"testing"
)

// PLACEHOLDER on the console-pages branch: the memory page's helper replaces
// this file. It must never reach main.

var memoryShots = []string{}

func seedMemory(ctx context.Context, t *testing.T, s *pagesSuite) []string { return nil }
