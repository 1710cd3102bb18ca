package browser

import (
	"context"
	"fmt"
	"testing"
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
		id, c, state := s.run(ctx, t, spec)
		if state != "RUN_STATE_COMPLETED" {
			t.Fatalf("run %d (%s) ended %s", i+1, id, state)
		}
		if conv == "" {
			conv = c
			// The runs are no memory worth keeping.
			s.setMemory(ctx, t, map[string]any{"conversation_id": conv, "conversation_capture": false})
		}
	}
	return []string{"CONVERSATION_ID=" + conv, fmt.Sprintf("RUN_COUNT=%d", chatHistoryRuns)}
}
