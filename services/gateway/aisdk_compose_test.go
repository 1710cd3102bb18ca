package gateway

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// TestAISDKSkipsInnerCalls: the calls a tool composition made (events with
// parent_tool_call_id) get no tool parts; the composition's call does.
func TestAISDKSkipsInnerCalls(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := natstest.NewRun(e.js, "acme", "run-1")
	r.ConversationID = "chat-1"
	input, _ := structpb.NewStruct(map[string]any{"path": "a.csv"})
	for _, ev := range []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "q", Model: "m"}}},
		{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call-1", ToolName: "read_twice", ToolInput: input}}},
		{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call-1/s0", ToolName: "file_read", ToolInput: input, ParentToolCallId: "call-1"}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call-1/s0", ToolName: "file_read", Observation: "inner", Success: true, ParentToolCallId: "call-1"}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call-1", ToolName: "read_twice", Observation: "outer", Success: true}}},
	} {
		if _, err := r.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	body := `{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"q"}]}]}`
	chunks := uiChunks(t, post(ctx, t, e.base+"/v1/chat", keyAcme, body, nil))
	var tools []string
	for _, c := range chunks {
		if typ, _ := c["type"].(string); strings.HasPrefix(typ, "tool-") {
			tools = append(tools, typ+":"+c["toolCallId"].(string))
		}
	}
	if got := strings.Join(tools, " "); got != "tool-input-available:call-1 tool-output-available:call-1" {
		t.Errorf("tool parts: %s", got)
	}
}
