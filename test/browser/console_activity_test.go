package browser

import (
	"context"
	"fmt"
	"testing"
)

// activityShots are the screenshots console_activity.mjs leaves.
var activityShots = []string{"activity-runs.png", "activity-run.png", "activity-tablet.png"}

// The scripted requests the activity page's check runs: a data-quality
// check (a skill, then six tool calls, two of them in parallel), a
// question that waits for a clarification (it times out after 5 s and the
// run goes on) and, to page past the first 20, cheap runs whose first two
// tool calls fail.
const (
	activityQualityAsk = "Check the orders data for quality problems before we analyse it."
	activityWaitAsk    = "Compare our revenue across periods."
	activityErrorsAsk  = "scripted test: exercise tool errors"
	activityErrorRuns  = 22
)

// seedActivity starts the activity page's runs through the public API,
// oldest first (so the data-quality run is on the second page of the
// list), and waits until every one has ended. The script gets the
// data-quality run's id (ACTIVITY_RUN_ID) and the number of runs
// (ACTIVITY_RUNS).
func seedActivity(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	start := func(input string) string {
		id, _ := s.start(ctx, t, map[string]any{"input": input})
		return id
	}
	quality := start(activityQualityAsk)
	ids := []string{quality, start(activityWaitAsk)}
	for range activityErrorRuns {
		ids = append(ids, start(activityErrorsAsk))
	}
	for _, id := range ids {
		s.wait(ctx, t, id)
	}
	return []string{"ACTIVITY_RUN_ID=" + quality, fmt.Sprintf("ACTIVITY_RUNS=%d", len(ids))}
}
