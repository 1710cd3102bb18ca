package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// The wire types are written out here, rather than reusing go-openai's, so
// that the bytes match what OpenAI sends (explicit nulls, empty choices in
// the usage chunk).

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type wireChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []wireChunkChoice `json:"choices"`
	Usage             *wireUsage        `json:"usage"`
}

type wireMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type wireCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
}

// fingerprint marks every response as the scripted model's.
const fingerprint = "scripted"

// completionID is derived from the reply so that the same conversation gets
// the same id (the server keeps no state and no clock-based ids).
func completionID(r *reply) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s", r.label, r.turn, r.text, r.reasoning)
	for _, c := range r.calls {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s", c.id, c.name, c.arguments)
	}
	return "chatcmpl-scripted-" + hex.EncodeToString(h.Sum(nil)[:10])
}

func completionResponse(id string, r *reply, u wireUsage) wireCompletion {
	msg := wireMessage{Role: "assistant", ReasoningContent: r.reasoning}
	if r.text != "" || len(r.calls) == 0 {
		t := r.text
		msg.Content = &t
	}
	for _, c := range r.calls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: c.id, Type: "function", Function: wireFunction{Name: c.name, Arguments: c.arguments}})
	}
	return wireCompletion{
		ID: id, Object: "chat.completion", Model: ModelName, SystemFingerprint: fingerprint,
		Choices: []wireChoice{{Message: msg, FinishReason: r.finishReason()}},
		Usage:   u,
	}
}

// stream writes r as server-sent events in OpenAI's format: a role chunk,
// reasoning and text in fragments of at most ChunkBytes, each tool call
// opened with its id and name and its arguments in fragments, the finish
// chunk, the usage chunk when asked for, then [DONE]. It stops when the
// client goes away.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, id string, r *reply, u wireUsage, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ch wireChunk) bool {
		if ctx.Err() != nil {
			return false
		}
		ch.ID, ch.Object, ch.Model, ch.SystemFingerprint = id, "chat.completion.chunk", ModelName, fingerprint
		b, err := json.Marshal(ch)
		if err != nil {
			return false
		}
		_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		return err == nil
	}
	delta := func(d wireDelta) bool {
		return send(wireChunk{Choices: []wireChunkChoice{{Delta: d}}})
	}
	// The answer is ready at once, so the fragments are written back to
	// back and reach the client as the transport's buffer fills; only the
	// first chunk is flushed at once, so the client sees the stream open.
	empty := ""
	if !delta(wireDelta{Role: "assistant", Content: &empty}) || rc.Flush() != nil {
		return
	}
	for _, piece := range split(r.reasoning, s.opts.ChunkBytes) {
		if !delta(wireDelta{ReasoningContent: piece}) {
			return
		}
	}
	for _, piece := range split(r.text, s.opts.ChunkBytes) {
		p := piece
		if !delta(wireDelta{Content: &p}) {
			return
		}
	}
	for i, c := range r.calls {
		idx := i
		if !delta(wireDelta{ToolCalls: []wireToolCall{{Index: &idx, ID: c.id, Type: "function", Function: wireFunction{Name: c.name}}}}) {
			return
		}
		for _, piece := range split(c.arguments, s.opts.ChunkBytes) {
			if !delta(wireDelta{ToolCalls: []wireToolCall{{Index: &idx, Function: wireFunction{Arguments: piece}}}}) {
				return
			}
		}
	}
	finish := r.finishReason()
	if !send(wireChunk{Choices: []wireChunkChoice{{Delta: wireDelta{}, FinishReason: &finish}}}) {
		return
	}
	if includeUsage {
		uu := u
		if !send(wireChunk{Choices: []wireChunkChoice{}, Usage: &uu}) {
			return
		}
	}
	if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err == nil {
		_ = rc.Flush()
	}
}

// split cuts s into pieces of at most n bytes, never inside a UTF-8
// character.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		if len(s) <= n {
			return append(out, s)
		}
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type wireError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := wireError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func writeErrorParam(w http.ResponseWriter, status int, param, msg string) {
	writeJSON(w, status, map[string]any{"error": wireError{Message: "Invalid parameter: " + param + ": " + msg, Type: "invalid_request_error", Param: &param}})
}
