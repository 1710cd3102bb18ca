package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Delta is one fragment of a streamed assistant message. Exactly one of
// Text, Reasoning and ToolCall is set.
type Delta struct {
	// Text is a fragment of the answer content.
	Text string
	// Reasoning is a fragment of the model's separate reasoning (thought),
	// from reasoning_content or reasoning, when the provider streams it.
	Reasoning string
	// ToolCall is a fragment of a tool call.
	ToolCall *ToolCallDelta
}

// ToolCallDelta is a fragment of one tool call. Fragments with the same
// Index belong to the same call; ID and Name arrive with its first fragment
// and Arguments is a piece of the argument JSON to append.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// DeltaFunc receives the deltas of a streaming call in order, on the
// calling goroutine. Returning an error stops the stream; the call then
// returns that error.
type DeltaFunc func(Delta) error

// chunkReasoning reads the `reasoning` delta field some servers (vLLM,
// OpenRouter) use instead of DeepSeek's reasoning_content.
type chunkReasoning struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Reasoning string `json:"reasoning"`
		} `json:"delta"`
	} `json:"choices"`
}

// callBuilder accumulates one tool call.
type callBuilder struct {
	present bool
	id      string
	name    string
	args    []byte
}

// assembler turns chunks into deltas and the final message. Only choice 0 is
// read: requests never ask for n > 1.
type assembler struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []callBuilder
	// nextAuto is where a tool call without an index goes (servers that send
	// each call whole).
	nextAuto int
	size     int

	finish    string
	usage     *openai.Usage
	id, model string
	delivered int
}

// addRaw decodes one `data:` payload and applies it.
func (a *assembler) addRaw(raw []byte, emit DeltaFunc) error {
	var chunk openai.ChatCompletionStreamResponse
	if err := json.Unmarshal(raw, &chunk); err != nil {
		return &Error{Kind: KindProtocol, Message: fmt.Sprintf("malformed stream chunk: %v", err), Err: err}
	}
	extra := ""
	if bytes.Contains(raw, []byte(`"reasoning"`)) {
		var r chunkReasoning
		if json.Unmarshal(raw, &r) == nil {
			for _, c := range r.Choices {
				if c.Index == 0 {
					extra = c.Delta.Reasoning
				}
			}
		}
	}
	return a.add(&chunk, extra, emit)
}

func (a *assembler) add(chunk *openai.ChatCompletionStreamResponse, extraReasoning string, emit DeltaFunc) error {
	if a.id == "" {
		a.id = chunk.ID
	}
	if a.model == "" {
		a.model = chunk.Model
	}
	if chunk.Usage != nil {
		u := *chunk.Usage
		a.usage = &u
	}
	for i := range chunk.Choices {
		c := &chunk.Choices[i]
		if c.Index != 0 {
			continue
		}
		reasoning := c.Delta.ReasoningContent
		if reasoning == "" {
			reasoning = extraReasoning
		}
		if err := a.grow(len(reasoning) + len(c.Delta.Content)); err != nil {
			return err
		}
		if reasoning != "" {
			a.reasoning.WriteString(reasoning)
			if err := a.emit(emit, Delta{Reasoning: reasoning}); err != nil {
				return err
			}
		}
		if c.Delta.Content != "" {
			a.content.WriteString(c.Delta.Content)
			if err := a.emit(emit, Delta{Text: c.Delta.Content}); err != nil {
				return err
			}
		}
		for j := range c.Delta.ToolCalls {
			if err := a.addToolCall(&c.Delta.ToolCalls[j], emit); err != nil {
				return err
			}
		}
		if c.FinishReason != "" {
			a.finish = string(c.FinishReason)
		}
	}
	return nil
}

func (a *assembler) addToolCall(tc *openai.ToolCall, emit DeltaFunc) error {
	idx := a.nextAuto
	if tc.Index != nil {
		idx = *tc.Index
	}
	if idx < 0 || idx >= MaxToolCalls {
		return &Error{Kind: KindProtocol, Message: fmt.Sprintf("tool call index %d is outside 0..%d", idx, MaxToolCalls-1)}
	}
	if err := a.grow(len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)); err != nil {
		return err
	}
	for len(a.calls) <= idx {
		a.calls = append(a.calls, callBuilder{})
	}
	b := &a.calls[idx]
	if tc.ID != "" && b.id != "" && tc.ID != b.id {
		return &Error{Kind: KindProtocol, Message: fmt.Sprintf("tool call index %d changed id from %q to %q", idx, b.id, tc.ID)}
	}
	b.present = true
	if b.id == "" {
		b.id = tc.ID
	}
	// Some servers repeat the name in every fragment; others split it.
	if tc.Function.Name != "" && tc.Function.Name != b.name {
		b.name += tc.Function.Name
	}
	b.args = append(b.args, tc.Function.Arguments...)
	a.nextAuto = max(a.nextAuto, idx+1)
	return a.emit(emit, Delta{ToolCall: &ToolCallDelta{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
}

func (a *assembler) grow(n int) error {
	a.size += n
	if a.size > MaxMessageBytes {
		return &Error{Kind: KindProtocol, Message: fmt.Sprintf("the assistant message exceeds %d bytes", MaxMessageBytes)}
	}
	return nil
}

func (a *assembler) emit(emit DeltaFunc, d Delta) error {
	a.delivered++
	if emit == nil {
		return nil
	}
	if err := emit(d); err != nil {
		return &callbackError{err}
	}
	return nil
}

// message is the assembled assistant message. Calls without an id get
// `call_<index>` so that the tool result can still be paired.
func (a *assembler) message() Message {
	m := Message{Role: RoleAssistant, Content: a.content.String(), ReasoningContent: a.reasoning.String()}
	for i := range a.calls {
		b := &a.calls[i]
		if !b.present {
			continue
		}
		id := b.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: b.name, Arguments: string(b.args)})
	}
	return m
}

// callbackError marks an error returned by the caller's DeltaFunc, which is
// returned as is.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

func usageOf(u *openai.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens), TotalTokens: int64(u.TotalTokens)}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedPromptTokens = int64(d.CachedTokens)
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = int64(d.ReasoningTokens)
	}
	return out
}
