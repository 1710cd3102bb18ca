package contextsvc

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// How a message is stored in the history stream: the ChatMessage in its
// protobuf encoding, with a header naming the format so that a later version
// can change it without misreading old records.
const (
	formatHeader  = "Baagent-Format"
	formatVersion = "chat-message/1"
)

// errBadRecord marks a stream record that is not a stored message.
var errBadRecord = errors.New("not a stored chat message")

// encodeRecord serialises a stored message.
func encodeRecord(m *baagentv1.ChatMessage) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// decodeRecord parses a stored message and checks what every stored message
// has: an id and a known role. Records written by this service always pass;
// anything else (a foreign publisher, a corrupted store) is refused rather
// than served as history.
func decodeRecord(format string, data []byte) (*baagentv1.ChatMessage, error) {
	if format != formatVersion {
		return nil, fmt.Errorf("%w: format %q, want %q", errBadRecord, format, formatVersion)
	}
	m := &baagentv1.ChatMessage{}
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	if m.GetId() == "" {
		return nil, fmt.Errorf("%w: no id", errBadRecord)
	}
	if _, ok := baagentv1.Role_name[int32(m.GetRole())]; !ok || m.GetRole() == baagentv1.Role_ROLE_UNSPECIFIED {
		return nil, fmt.Errorf("%w: role %d", errBadRecord, m.GetRole())
	}
	return m, nil
}

// defaultImportance is the MessageImportance of a message whose
// caller did not set one: user messages and errors CRITICAL, tool
// observations HIGH, agent thoughts MEDIUM, system messages LOW.
func defaultImportance(m *baagentv1.ChatMessage) baagentv1.MessageImportance {
	switch {
	case m.GetRole() == baagentv1.Role_ROLE_USER, m.GetIsError():
		return baagentv1.MessageImportance_MESSAGE_IMPORTANCE_CRITICAL
	case m.GetRole() == baagentv1.Role_ROLE_TOOL:
		return baagentv1.MessageImportance_MESSAGE_IMPORTANCE_HIGH
	case m.GetRole() == baagentv1.Role_ROLE_ASSISTANT:
		return baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM
	default:
		return baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW
	}
}

// newMessageID returns a random id for a message appended without one. Such
// an append is not idempotent: a retry stores the message again.
func newMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "msg_" + hex.EncodeToString(b[:])
}

// contentHash identifies what a model sees of a message: the fields the
// tokens service counts (role, content, name, tool calls, tool_call_id).
// Counts and summaries are cached by it.
type contentHash [32]byte

func hashContent(m *baagentv1.ChatMessage) contentHash {
	counted := &baagentv1.ChatMessage{
		Role:       m.GetRole(),
		Content:    m.GetContent(),
		Name:       m.GetName(),
		ToolCalls:  m.GetToolCalls(),
		ToolCallId: m.GetToolCallId(),
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(counted) // cannot fail for a valid message
	return sha256.Sum256(b)
}
