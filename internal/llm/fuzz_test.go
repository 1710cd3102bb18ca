package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// bodyTransport answers every request with a fixed 200 SSE body.
type bodyTransport struct{ body []byte }

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b.body)), Request: r}, nil
}

// FuzzStreamAssembly feeds arbitrary bytes as the SSE body of a streaming
// call: the SSE framing, chunk decoding and tool-call assembly must never
// panic, and a successful call must equal the deltas it delivered.
func FuzzStreamAssembly(f *testing.F) {
	f.Add([]byte(strings.Join(parallelToolCallStream, "")))
	f.Add([]byte(strings.Join(sse(chunk(`{"content":"Hi"}`, ""), chunk(`{"reasoning_content":"r"}`, ""), chunk(`{}`, "stop")), "")))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"))
	f.Add([]byte(": keep-alive\n\nevent: x\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":127,\"id\":\"c\"}]},\"finish_reason\":\"stop\"}]}\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := New(Config{BaseURL: "http://fuzz.invalid/v1", Model: "m", HTTPClient: &http.Client{Transport: bodyTransport{body}}, Retry: RetryPolicy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var text, reasoning strings.Builder
		args := map[int]string{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Chat(ctx, userRequest("q"), func(d Delta) error {
			text.WriteString(d.Text)
			reasoning.WriteString(d.Reasoning)
			if d.ToolCall != nil {
				if d.ToolCall.Index < 0 || d.ToolCall.Index >= MaxToolCalls {
					t.Fatalf("delta index %d out of range", d.ToolCall.Index)
				}
				args[d.ToolCall.Index] += d.ToolCall.Arguments
			}
			return nil
		})
		if err != nil {
			var e *Error
			if ctx.Err() != nil {
				t.Fatalf("the call hung on %q", body)
			}
			if !errors.As(err, &e) {
				t.Fatalf("error is not an *Error: %v", err)
			}
			return
		}
		if resp.FinishReason == "" {
			t.Fatal("success without a finish reason")
		}
		if resp.Message.Content != text.String() || resp.Message.ReasoningContent != reasoning.String() {
			t.Fatalf("message %q/%q differs from deltas %q/%q", resp.Message.Content, resp.Message.ReasoningContent, text.String(), reasoning.String())
		}
		if len(resp.Message.ToolCalls) != len(args) {
			t.Fatalf("%d tool calls from %d indexes", len(resp.Message.ToolCalls), len(args))
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.ID == "" {
				t.Fatal("tool call without id")
			}
		}
	})
}
