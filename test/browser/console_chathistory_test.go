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

// chatHistoryRuns is how many runs seedChatHistory starts in one
// conversation: more than the chat shows at first (20), so that the page
// must load the earlier ones.
const chatHistoryRuns = 23

var chathistoryShots = []string{"chat-history.png"}

// seedChatHistory starts chatHistoryRuns short scripted runs, one after
// another, in one conversation and waits for each to complete. The script
// gets the conversation id and the first run's input.
func seedChatHistory(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	conv := ""
	for i := range chatHistoryRuns {
		spec := map[string]any{"input": "Which product category had the highest revenue last quarter?"}
		if conv != "" {
			spec["conversation_id"] = conv
		}
		var started struct {
			Run struct {
				RunID          string `json:"run_id"`
				ConversationID string `json:"conversation_id"`
			} `json:"run"`
		}
		if code := apiJSON(ctx, t, s.Base, http.MethodPost, "/v1/runs", map[string]any{"spec": spec}, &started); code != http.StatusOK {
			t.Fatalf("POST /v1/runs (run %d) = %d", i+1, code)
		}
		id := started.Run.RunID
		if conv == "" {
			conv = started.Run.ConversationID
			// The same request over and over would make the agent offer to
			// reuse what it learnt (an interaction pattern) and wait for
			// the answer; and the runs are no memory worth keeping.
			settings := map[string]any{"conversation_id": conv, "conversation_patterns": false, "conversation_capture": false}
			if code := apiJSON(ctx, t, s.Base, http.MethodPatch, "/v1/memory/settings", settings, nil); code != http.StatusOK {
				t.Fatalf("PATCH /v1/memory/settings = %d", code)
			}
		}
		testkit.EventuallyContext(ctx, t, "run "+id+" to complete", func() (bool, string) {
			var got struct {
				Run struct {
					State string `json:"state"`
				} `json:"run"`
			}
			if code := apiJSON(ctx, t, s.Base, http.MethodGet, "/v1/runs/"+id, nil, &got); code != http.StatusOK {
				return false, fmt.Sprintf("GET = %d", code)
			}
			if got.Run.State == "RUN_STATE_FAILED" || got.Run.State == "RUN_STATE_CANCELLED" {
				t.Fatalf("run %s ended %s", id, got.Run.State)
			}
			return got.Run.State == "RUN_STATE_COMPLETED", got.Run.State
		})
	}
	return []string{"CONVERSATION_ID=" + conv, fmt.Sprintf("RUN_COUNT=%d", chatHistoryRuns)}
}

// apiJSON sends a JSON request to the suite's gateway (no API key: the
// suite does not ask for one) and decodes a JSON answer into out. It
// returns the HTTP status.
func apiJSON(ctx context.Context, t *testing.T, base, method, path string, body, out any) int {
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
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %.300s", method, path, err, b)
		}
	}
	return resp.StatusCode
}
