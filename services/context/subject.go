package contextsvc

import (
	"strings"

	"github.com/baagent/baagent/internal/natsx"
)

// historySubject is where a conversation's messages live:
// "baagent.<tenant>.conversation.<token>.messages" (natsx.StreamHistory).
//
// A conversation id may contain '.' and ':' (validate.ID), which a NATS
// subject token may not. Ids that are already valid tokens are used as they
// are, so subjects stay readable; others are escaped to "~" + the id with
// '.' as "~2E" and ':' as "~3A". Valid ids never contain '~', so the mapping
// is injective: two conversations never share a subject.
func historySubject(tenant, conversationID string) (string, error) {
	if natsx.ValidateToken("conversation_id", conversationID) == nil {
		return natsx.HistorySubject(tenant, conversationID)
	}
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return "", err
	}
	return "baagent." + tenant + ".conversation." + escapeConversation(conversationID) + ".messages", nil
}

var conversationEscaper = strings.NewReplacer(".", "~2E", ":", "~3A")

func escapeConversation(id string) string {
	return "~" + conversationEscaper.Replace(id)
}
