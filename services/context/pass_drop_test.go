package contextsvc

import (
	"fmt"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestUserRequestBelowCritical: a user request its caller marked LOW may be
// compressed, and the window says so (is_compressed with its id).
func TestUserRequestBelowCritical(t *testing.T) {
	e := newEnv(t, Options{})
	var hist []*baagentv1.ChatMessage
	for i := range 30 {
		hist = append(hist,
			&baagentv1.ChatMessage{Id: fmt.Sprintf("u%d", i), Role: roleUser, Content: strings.Repeat("pasted report text ", 200), Importance: baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW},
			&baagentv1.ChatMessage{Id: fmt.Sprintf("a%d", i), Role: roleAssistant, Content: "noted"})
	}
	appendAll(t, e.client, "t", "c", hist)
	req := buildReqFor("test-8k", strategyTruncate)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "test-8k", history: readAll(t, e.client, "t", "c", 0)}.check(t, e, req, resp)
}
