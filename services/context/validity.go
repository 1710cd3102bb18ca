package contextsvc

import (
	"fmt"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// checkChatRequest reports whether msgs form a valid OpenAI chat request as
// far as message order goes: every tool message follows, with only tool
// messages in between, the assistant message whose tool call it answers;
// every tool call of an assistant message is answered before the next
// non-tool message (and before the end); every message has a known role.
// BuildWindow checks every window it returns.
func checkChatRequest(msgs []*baagentv1.WindowMessage) error {
	var open map[string]bool // calls of the current assistant message not answered yet
	var openAt int
	closeOpen := func(i int) error {
		for id := range open {
			return fmt.Errorf("message %d: tool call %q of the assistant message at %d has no result before it", i, id, openAt)
		}
		open = nil
		return nil
	}
	for i, wm := range msgs {
		m := wm.GetMessage()
		switch m.GetRole() {
		case baagentv1.Role_ROLE_TOOL:
			if !open[m.GetToolCallId()] {
				return fmt.Errorf("message %d: tool message for %q does not follow the assistant message that called it", i, m.GetToolCallId())
			}
			delete(open, m.GetToolCallId())
			continue
		case baagentv1.Role_ROLE_SYSTEM, baagentv1.Role_ROLE_USER, baagentv1.Role_ROLE_ASSISTANT:
		default:
			return fmt.Errorf("message %d: role %v", i, m.GetRole())
		}
		if err := closeOpen(i); err != nil {
			return err
		}
		if m.GetRole() == baagentv1.Role_ROLE_ASSISTANT && len(m.GetToolCalls()) > 0 {
			open, openAt = map[string]bool{}, i
			for _, c := range m.GetToolCalls() {
				if c.GetId() == "" || open[c.GetId()] {
					return fmt.Errorf("message %d: tool call id %q empty or repeated", i, c.GetId())
				}
				open[c.GetId()] = true
			}
		}
	}
	return closeOpen(len(msgs))
}
