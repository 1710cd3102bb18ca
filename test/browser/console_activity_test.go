package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/baagent/baagent/internal/testkit"
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
	quality := activityStartRun(ctx, t, s.Base, activityQualityAsk)
	ids := []string{quality, activityStartRun(ctx, t, s.Base, activityWaitAsk)}
	for range activityErrorRuns {
		ids = append(ids, activityStartRun(ctx, t, s.Base, activityErrorsAsk))
	}
	for _, id := range ids {
		testkit.EventuallyContext(ctx, t, "run "+id+" ends", func() (bool, string) {
			state, err := activityRunState(ctx, s.Base, id)
			if err != nil {
				return false, err.Error()
			}
			return state == "RUN_STATE_COMPLETED" || state == "RUN_STATE_FAILED" || state == "RUN_STATE_CANCELLED", state
		})
	}
	return []string{"ACTIVITY_RUN_ID=" + quality, fmt.Sprintf("ACTIVITY_RUNS=%d", len(ids))}
}

// activityStartRun starts a run (POST /v1/runs) and returns its id.
func activityStartRun(ctx context.Context, t *testing.T, base, input string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"input": input}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/runs: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/runs: %s %s", resp.Status, b)
	}
	var out struct {
		Run struct {
			RunID string `json:"run_id"`
		} `json:"run"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Run.RunID == "" {
		t.Fatalf("POST /v1/runs: no run id in %s (%v)", b, err)
	}
	return out.Run.RunID
}

// activityRunState reads a run's state (GET /v1/runs/{id}).
func activityRunState(ctx context.Context, base, id string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+id, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /v1/runs/%s: %s %s", id, resp.Status, b)
	}
	var out struct {
		Run struct {
			State string `json:"state"`
		} `json:"run"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.Run.State, nil
}
