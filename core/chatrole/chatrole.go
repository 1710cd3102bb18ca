// Package chatrole names chat roles as the OpenAI chat format writes them,
// for every place that renders or counts a conversation.
package chatrole

import baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"

// Name is r's wire name ("system", "user", "assistant", "tool"); ok is
// false for an unspecified or unknown role, whose rendering each caller
// decides (token counting writes nothing, a summary writes "unknown").
func Name(r baagentv1.Role) (name string, ok bool) {
	switch r {
	case baagentv1.Role_ROLE_SYSTEM:
		return "system", true
	case baagentv1.Role_ROLE_USER:
		return "user", true
	case baagentv1.Role_ROLE_ASSISTANT:
		return "assistant", true
	case baagentv1.Role_ROLE_TOOL:
		return "tool", true
	}
	return "", false
}
