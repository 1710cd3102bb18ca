package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// patternsShots are the screenshots console_patterns.mjs leaves.
var patternsShots = []string{"patterns.png", "patterns-edit.png", "patterns-tablet.png"}

// patternsMonths are the months of the three runs that teach the suite a
// pattern: examples/scenarios/patterns-top-products.yaml answers each with
// the same two sql_query calls, so their traces make one ranking pattern,
// active after the third (docs/concepts/patterns.md, "Try it").
var patternsMonths = []string{"March", "April", "May"}

// seedPatterns makes the suite learn a pattern as a person would: the same
// kind of question asked three times through POST /v1/runs, each run
// waited to its end and its trace to be learned (GET /v1/patterns lists
// the ranking pattern with one more use) before the next, as
// TestPatternsEndToEnd does. The script gets the pattern's id.
func seedPatterns(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var id string
	for i, month := range patternsMonths {
		goal := "Top 5 products by revenue in " + month + " 2026"
		var started struct {
			Run struct {
				RunID string `json:"run_id"`
			} `json:"run"`
		}
		if code := patternsCall(ctx, t, s.Base, http.MethodPost, "/v1/runs", map[string]any{"spec": map[string]any{"input": goal}}, &started); code != http.StatusOK || started.Run.RunID == "" {
			t.Fatalf("POST /v1/runs %q: %d, run %q", goal, code, started.Run.RunID)
		}
		runID := started.Run.RunID
		testkit.EventuallyContext(ctx, t, "run "+runID+" ("+goal+") completes", func() (bool, string) {
			var got struct {
				Run struct {
					State string `json:"state"`
				} `json:"run"`
			}
			code := patternsCall(ctx, t, s.Base, http.MethodGet, "/v1/runs/"+runID, nil, &got)
			if got.Run.State == "RUN_STATE_FAILED" || got.Run.State == "RUN_STATE_CANCELLED" || got.Run.State == "RUN_STATE_WAITING_INPUT" {
				t.Fatalf("run %s (%s) ended %s", runID, goal, got.Run.State)
			}
			return got.Run.State == "RUN_STATE_COMPLETED", fmt.Sprintf("%d %s", code, got.Run.State)
		})
		want := i + 1
		testkit.EventuallyContext(ctx, t, fmt.Sprintf("the trace of %s is learned (a ranking pattern used %d times)", runID, want), func() (bool, string) {
			var list struct {
				Patterns []struct {
					ID         string `json:"id"`
					UsageCount int    `json:"usage_count"`
					State      string `json:"state"`
				} `json:"patterns"`
			}
			code := patternsCall(ctx, t, s.Base, http.MethodGet, "/v1/patterns?task_type=ranking", nil, &list)
			for _, p := range list.Patterns {
				if p.UsageCount == want {
					id = p.ID
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d %+v", code, list.Patterns)
		})
	}
	t.Logf("the suite learned pattern %s from %d runs", id, len(patternsMonths))
	return []string{"PATTERN_ID=" + id}
}

// patternsCall sends one JSON request to the gateway and decodes the answer
// into out; it returns the HTTP status (0 when the request failed).
func patternsCall(ctx context.Context, t *testing.T, base, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}
