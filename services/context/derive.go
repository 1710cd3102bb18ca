package contextsvc

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/baagent/baagent/core/chatrole"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Compressed forms of a message (extracts and pruning, see
// docs/concepts/context-compression.md). Each is a pure function of the message, computed once
// per stored message and cached with its content hash, so that rebuilding a
// window never re-derives or re-counts them.
const (
	// extractToolChars and extractOtherChars are the extract's cut-offs: a tool
	// result keeps its first 200 characters, other messages their first 100.
	extractToolChars  = 200
	extractOtherChars = 100
	// prunedPlaceholder replaces a pruned tool output (as OpenCode does).
	prunedPlaceholder = "[Old tool result content cleared]"
	// omittedPlaceholder replaces content only when the window cannot fit
	// otherwise.
	omittedPlaceholder = "[omitted]"
	// summaryLineChars bounds one message's text in a summarizer prompt.
	summaryLineChars = 8 << 10
)

// derivedForms are the compressed forms of one stored message.
type derivedForms struct {
	// extract keeps the message's structure (role, tool calls, tool_call_id)
	// with its content cut to the extract.
	extract countable
	// pruned and omitted keep the structure with placeholder content.
	pruned, omitted countable
	// line is the message as one line of a collapsed extract.
	line string
}

func (s *storedMsg) forms() *derivedForms {
	s.derivedOnce.Do(func() {
		m := s.msg
		d := &s.derived
		d.extract = derivedMessage(m, extractContent(m))
		d.pruned = derivedMessage(m, prunedPlaceholder)
		d.omitted = derivedMessage(m, omittedPlaceholder)
		d.line = extractLine(m)
	})
	return &s.derived
}

// derivedMessage is m with its content replaced; reasoning is dropped (it is
// not part of what the window compresses to).
func derivedMessage(m *baagentv1.ChatMessage, content string) countable {
	d := &baagentv1.ChatMessage{
		Id:         m.GetId(),
		Role:       m.GetRole(),
		Content:    content,
		Name:       m.GetName(),
		ToolCalls:  m.GetToolCalls(),
		ToolCallId: m.GetToolCallId(),
		ToolName:   m.GetToolName(),
		IsError:    m.GetIsError(),
		Importance: m.GetImportance(),
		RoundId:    m.GetRoundId(),
		CreatedAt:  m.GetCreatedAt(),
		Kind:       m.GetKind(),
	}
	return countable{msg: d, hash: hashContent(d)}
}

// extractContent is the extract of a message's content.
func extractContent(m *baagentv1.ChatMessage) string {
	if m.GetRole() == baagentv1.Role_ROLE_TOOL {
		return "[Tool Result: " + cut(m.GetContent(), extractToolChars) + "]"
	}
	if m.GetContent() == "" {
		return ""
	}
	return "[" + roleName(m.GetRole()) + "] " + cut(m.GetContent(), extractOtherChars)
}

// extractLine renders a message for a collapsed extract: the extract
// plus the names of the tools an assistant called.
func extractLine(m *baagentv1.ChatMessage) string {
	var b strings.Builder
	if m.GetRole() == baagentv1.Role_ROLE_TOOL {
		b.WriteString("[Tool Result")
		if n := m.GetToolName(); n != "" {
			b.WriteString(" " + n)
		}
		if m.GetIsError() {
			b.WriteString(" (error)")
		}
		b.WriteString(": " + cut(m.GetContent(), extractToolChars) + "]")
		return b.String()
	}
	b.WriteString("[" + roleName(m.GetRole()) + "] " + cut(m.GetContent(), extractOtherChars))
	if calls := m.GetToolCalls(); len(calls) > 0 {
		b.WriteString(" [called:")
		for i, c := range calls {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + c.GetName())
		}
		b.WriteString("]")
	}
	return b.String()
}

// summaryLine renders a message for a summarizer prompt: the whole message,
// tool calls with their arguments, within summaryLineChars.
func summaryLine(m *baagentv1.ChatMessage) string {
	var b strings.Builder
	switch m.GetRole() {
	case baagentv1.Role_ROLE_TOOL:
		b.WriteString("[tool result")
		if n := m.GetToolName(); n != "" {
			b.WriteString(" " + n)
		}
		if m.GetIsError() {
			b.WriteString(", error")
		}
		b.WriteString("] ")
	default:
		b.WriteString("[" + roleName(m.GetRole()) + "] ")
	}
	b.WriteString(m.GetContent())
	for _, c := range m.GetToolCalls() {
		b.WriteString("\n  called " + c.GetName() + "(" + c.GetArguments() + ")")
	}
	return cut(b.String(), summaryLineChars)
}

// collapsed is a whole tool-call unit, or a lone message, replaced by one
// system message with the extracts of its members.
func collapsed(members []*storedMsg) countable {
	var b strings.Builder
	b.WriteString("[Compressed]")
	for _, s := range members {
		b.WriteString("\n")
		b.WriteString(s.forms().line)
	}
	m := &baagentv1.ChatMessage{
		Role:    baagentv1.Role_ROLE_SYSTEM,
		Content: b.String(),
		Kind:    baagentv1.MessageKind_MESSAGE_KIND_SUMMARY,
	}
	return countable{msg: m, hash: hashContent(m)}
}

// summaryMessage is a cached summary as it appears in a window.
func summaryMessage(text string, n int) countable {
	m := &baagentv1.ChatMessage{
		Role:    baagentv1.Role_ROLE_SYSTEM,
		Content: "[Summary of " + strconv.Itoa(n) + " earlier messages]\n" + text,
		Kind:    baagentv1.MessageKind_MESSAGE_KIND_SUMMARY,
	}
	return countable{msg: m, hash: hashContent(m)}
}

// cut returns the first n characters of s, with "..." when it was longer.
// It never splits a UTF-8 sequence.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "..."
}

func roleName(r baagentv1.Role) string {
	if name, ok := chatrole.Name(r); ok {
		return name
	}
	return "unknown"
}
