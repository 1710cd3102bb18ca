package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// patternsShots are the screenshots console_patterns.mjs leaves.
var patternsShots = []string{"patterns.png", "patterns-edit.png", "patterns-tablet.png"}

// patternsGoals are the questions of the three runs that teach the suite
// an active pattern: examples/scenarios/patterns-top-products.yaml answers
// each with the same two sql_query calls, so their traces make one ranking
// pattern, active after the third (docs/concepts/patterns.md, "Try it").
var patternsGoals = []string{
	"Top 5 products by revenue in March 2026",
	"Top 5 products by revenue in April 2026",
	"Top 5 products by revenue in May 2026",
}

// patternsCandidateGoal is one run of another kind of task
// (examples/scenarios/data-quality-check.yaml): its trace makes a
// data_quality pattern used once, a candidate that fails two gates.
const patternsCandidateGoal = "Check the orders data for quality problems before we analyse it."

// seedPatterns makes the suite learn patterns as a person would, by asking
// through POST /v1/runs: the same kind of question three times (an active
// pattern) and another once (a candidate). The script gets their ids and
// the active one's uses.
func seedPatterns(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The suite keeps patterns off for the other pages (see
	// TestConsolePagesInChromium).
	s.setMemory(ctx, t, map[string]any{"patterns_enabled": true})
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.setMemory(cctx, t, map[string]any{"patterns_enabled": false})
	})
	id, uses := learnPattern(ctx, t, s, "ranking", patternsGoals)
	candidate, _ := learnPattern(ctx, t, s, "data_quality", []string{patternsCandidateGoal})
	t.Logf("the suite learned pattern %s (%d uses) and candidate %s", id, uses, candidate)
	return []string{"PATTERN_ID=" + id, fmt.Sprintf("PATTERN_USES=%d", uses), "CANDIDATE_ID=" + candidate}
}

// learnPattern runs goals one after the other, each waited to its end and
// its trace to be learned (the uses of the task type's patterns grow by
// one, whether the trace made a pattern or evolved one an earlier run of
// the suite made) before the next, as TestPatternsEndToEnd does. It
// returns the pattern the runs taught and its uses.
func learnPattern(ctx context.Context, t *testing.T, s *pagesSuite, taskType string, goals []string) (string, int) {
	t.Helper()
	before, err := patternUses(ctx, t, s, taskType)
	if err != nil {
		t.Fatal(err)
	}
	total := func(m map[string]int) (n int) {
		for _, u := range m {
			n += u
		}
		return n
	}
	for i, goal := range goals {
		runID, _, state := s.run(ctx, t, map[string]any{"input": goal})
		if state != "RUN_STATE_COMPLETED" {
			t.Fatalf("run %s (%s) ended %s", runID, goal, state)
		}
		want := total(before) + i + 1
		testkit.EventuallyContext(ctx, t, fmt.Sprintf("the trace of %s is learned (%s patterns used %d times)", runID, taskType, want), func() (bool, string) {
			now, err := patternUses(ctx, t, s, taskType)
			return err == nil && total(now) >= want, fmt.Sprintf("%v %v", now, err)
		})
	}
	after, err := patternUses(ctx, t, s, taskType)
	if err != nil {
		t.Fatal(err)
	}
	id, uses := "", 0
	for pid, u := range after {
		if u > before[pid] && (id == "" || u-before[pid] > uses-before[id]) {
			id, uses = pid, u
		}
	}
	if id == "" {
		t.Fatalf("no %s pattern learned from %d runs: before %v, after %v", taskType, len(goals), before, after)
	}
	return id, uses
}

// patternUses reads the uses of the tenant's patterns of a task type.
func patternUses(ctx context.Context, t *testing.T, s *pagesSuite, taskType string) (map[string]int, error) {
	t.Helper()
	var list struct {
		Patterns []struct {
			ID         string `json:"id"`
			UsageCount int    `json:"usage_count"`
		} `json:"patterns"`
	}
	code, b := s.do(ctx, t, http.MethodGet, "/v1/patterns?page_size=500&task_type="+taskType, "", nil)
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/patterns?task_type=%s: %d %.200s", taskType, code, b)
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range list.Patterns {
		out[p.ID] = p.UsageCount
	}
	return out, nil
}
