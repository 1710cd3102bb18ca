package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two parallel tool calls whose arguments arrive in pieces, interleaved by
// index, then the finish chunk and the usage chunk, as OpenAI streams them.
var parallelToolCallStream = sse(
	chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Qm1","type":"function","function":{"name":"sql_query","arguments":""}}],"refusal":null}`, ""),
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"qu"}}]}`, ""),
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ery\": \"SELECT 1\""}}]}`, ""),
	chunk(`{"tool_calls":[{"index":1,"id":"call_Rz2","type":"function","function":{"name":"file_read","arguments":""}}]}`, ""),
	chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":"}}]}`, ""),
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":", \"max_rows\": 5}"}}]}`, ""),
	chunk(`{"tool_calls":[{"index":1,"function":{"arguments":" \"orders.csv\"}"}}]}`, ""),
	chunk(`{}`, "tool_calls"),
	usageChunk(321, 45),
)

func TestChatStreamsParallelToolCalls(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{lines: parallelToolCallStream})
	c, _ := testClient(t, srv, nil)
	req := userRequest("What is in the data?")
	req.Tools = []Tool{{Name: "sql_query", Description: "Run SQL", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)}, {Name: "file_read"}}

	var deltas []Delta
	resp, err := c.Chat(context.Background(), req, func(d Delta) error { deltas = append(deltas, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{
		{ID: "call_Qm1", Name: "sql_query", Arguments: `{"query": "SELECT 1", "max_rows": 5}`},
		{ID: "call_Rz2", Name: "file_read", Arguments: `{"path": "orders.csv"}`},
	}
	if len(resp.Message.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", resp.Message.ToolCalls)
	}
	for i, w := range want {
		if resp.Message.ToolCalls[i] != w {
			t.Errorf("tool call %d = %+v, want %+v", i, resp.Message.ToolCalls[i], w)
		}
		if !json.Valid([]byte(resp.Message.ToolCalls[i].Arguments)) {
			t.Errorf("tool call %d arguments are not JSON", i)
		}
	}
	if resp.FinishReason != FinishToolCalls || resp.Message.Role != RoleAssistant || resp.Message.Content != "" {
		t.Errorf("finish %q role %q content %q", resp.FinishReason, resp.Message.Role, resp.Message.Content)
	}
	if !resp.UsageReported || resp.Usage != (Usage{PromptTokens: 321, CompletionTokens: 45, TotalTokens: 366, CachedPromptTokens: 64}) {
		t.Errorf("usage = %+v reported %v", resp.Usage, resp.UsageReported)
	}
	if resp.Attempts != 1 || resp.ID != "chatcmpl-9xQ" || resp.Model != "gpt-4o-2024-08-06" {
		t.Errorf("attempts %d id %q model %q", resp.Attempts, resp.ID, resp.Model)
	}
	// Seven tool-call fragments, in wire order, reassembling to the calls.
	if len(deltas) != 7 {
		t.Fatalf("got %d deltas: %+v", len(deltas), deltas)
	}
	args := map[int]string{}
	for _, d := range deltas {
		if d.ToolCall == nil {
			t.Fatalf("unexpected delta %+v", d)
		}
		args[d.ToolCall.Index] += d.ToolCall.Arguments
	}
	if args[0] != want[0].Arguments || args[1] != want[1].Arguments {
		t.Errorf("fragments reassemble to %v", args)
	}
	if deltas[0].ToolCall.ID != "call_Qm1" || deltas[0].ToolCall.Name != "sql_query" {
		t.Errorf("first fragment %+v", deltas[0].ToolCall)
	}

	body := f.body(0)
	if body["stream"] != true || body["model"] != "gpt-4o" {
		t.Errorf("stream/model = %v/%v", body["stream"], body["model"])
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", body["stream_options"])
	}
	tools, _ := body["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("tools = %v", body["tools"])
	}
	second := tools[1].(map[string]any)["function"].(map[string]any)
	if second["name"] != "file_read" || second["parameters"] == nil {
		t.Errorf("tool without parameters sent as %v", second)
	}
	if got := f.headers[0].Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestChatStreamsTextAndReasoning(t *testing.T) {
	t.Parallel()

	_, srv := newFakeEndpoint(t, reply{lines: sse(
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(`{"reasoning_content":"The user wants "}`, ""),
		chunk(`{"reasoning_content":"a greeting."}`, ""),
		`{"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"reasoning":" (vLLM style)"},"finish_reason":null}]}`,
		chunk(`{"content":"Hello"}`, ""),
		chunk(`{"content":", world."}`, ""),
		chunk(`{}`, "stop"),
	)})
	c, _ := testClient(t, srv, nil)
	var text, thought strings.Builder
	resp, err := c.Chat(context.Background(), userRequest("hi"), func(d Delta) error {
		text.WriteString(d.Text)
		thought.WriteString(d.Reasoning)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Hello, world." || text.String() != resp.Message.Content {
		t.Errorf("content %q, deltas %q", resp.Message.Content, text.String())
	}
	if resp.Message.ReasoningContent != "The user wants a greeting. (vLLM style)" || thought.String() != resp.Message.ReasoningContent {
		t.Errorf("reasoning %q, deltas %q", resp.Message.ReasoningContent, thought.String())
	}
	if resp.FinishReason != FinishStop || resp.UsageReported {
		t.Errorf("finish %q usage reported %v", resp.FinishReason, resp.UsageReported)
	}
	if resp.FirstDelta <= 0 {
		t.Errorf("first delta time %v", resp.FirstDelta)
	}
}

func TestChatRetriesRateLimitHonouringRetryAfter(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	f, srv := newFakeEndpoint(t,
		reply{status: 429, header: map[string]string{"Retry-After": "7"}, lines: []string{`{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}},
		reply{lines: sse(chunk(`{"content":"ok"}`, "stop"), usageChunk(10, 1))},
	)
	c, slept := testClient(t, srv, func(c *Config) { c.Registerer = reg })
	resp, err := c.Chat(context.Background(), userRequest("q"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 2 || f.requests() != 2 || resp.Message.Content != "ok" {
		t.Errorf("attempts %d requests %d content %q", resp.Attempts, f.requests(), resp.Message.Content)
	}
	if len(*slept) != 1 || (*slept)[0] != 7*time.Second {
		t.Errorf("slept %v, want [7s] from Retry-After", *slept)
	}
	if got := testutil.ToFloat64(c.metrics.retries.WithLabelValues("gpt-4o", "rate_limited")); got != 1 {
		t.Errorf("retries metric = %v", got)
	}
	if got := testutil.ToFloat64(c.metrics.requests.WithLabelValues("gpt-4o", "ok")); got != 1 {
		t.Errorf("requests{ok} = %v", got)
	}
	if got := testutil.ToFloat64(c.metrics.tokensVec.WithLabelValues("gpt-4o", "prompt")); got != 10 {
		t.Errorf("prompt tokens metric = %v", got)
	}
}

func TestChatRetriesServerErrorWithBackoff(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t,
		reply{status: 500, lines: []string{`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`}},
		reply{status: 502, lines: []string{`<html>Bad gateway</html>`}},
		reply{lines: sse(chunk(`{"content":"fine"}`, "stop"))},
	)
	c, slept := testClient(t, srv, nil)
	resp, err := c.Chat(context.Background(), userRequest("q"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 3 || f.requests() != 3 {
		t.Errorf("attempts %d requests %d", resp.Attempts, f.requests())
	}
	// rand 0.5: the waits are 3/4 of 500ms and of 1s.
	if len(*slept) != 2 || (*slept)[0] != 375*time.Millisecond || (*slept)[1] != 750*time.Millisecond {
		t.Errorf("slept %v", *slept)
	}
}

func TestChatGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()

	errBody := []string{`{"error":{"message":"The server had an error processing your request.","type":"server_error"}}`}
	f, srv := newFakeEndpoint(t, reply{status: 500, lines: errBody}, reply{status: 500, lines: errBody}, reply{status: 500, lines: errBody})
	c, _ := testClient(t, srv, func(c *Config) { c.Retry.MaxAttempts = 2 })
	_, err := c.Chat(context.Background(), userRequest("q"), nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindServer || e.Attempts != 2 || e.StatusCode != 500 || f.requests() != 2 {
		t.Fatalf("err = %v (%+v), requests %d", err, e, f.requests())
	}
	if !errors.Is(err, ErrServer) || errors.Is(err, ErrRateLimited) {
		t.Errorf("errors.Is does not match the kind: %v", err)
	}
}

func TestChatRetryAfterBeyondCapFailsAtOnce(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{status: 429, header: map[string]string{"Retry-After": "3600"}, lines: []string{`{"error":{"message":"quota","type":"requests"}}`}})
	c, slept := testClient(t, srv, nil)
	_, err := c.Chat(context.Background(), userRequest("q"), nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrRateLimited) || e.RetryAfter != time.Hour || f.requests() != 1 || len(*slept) != 0 {
		t.Fatalf("err = %v, requests %d, slept %v", err, f.requests(), *slept)
	}
}

func TestChatTypedErrorsAreNotRetried(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"auth", 401, `{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, ErrAuth},
		{"bad request", 400, `{"error":{"message":"Invalid value for 'tool_choice'","type":"invalid_request_error","param":"tool_choice","code":null}}`, ErrBadRequest},
		{"context length", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, ErrContextLength},
		{"no such model", 404, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, ErrModelUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, srv := newFakeEndpoint(t, reply{status: tc.status, lines: []string{tc.body}}, reply{lines: sse(chunk(`{"content":"x"}`, "stop"))})
			c, _ := testClient(t, srv, nil)
			_, err := c.Chat(context.Background(), userRequest("q"), nil)
			if !errors.Is(err, tc.want) || f.requests() != 1 {
				t.Fatalf("err = %v, requests %d", err, f.requests())
			}
			if !strings.Contains(err.Error(), `model "gpt-4o"`) {
				t.Errorf("error does not name the model: %v", err)
			}
		})
	}
}

func TestChatStreamErrorEventBeforeDeltasIsRetried(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t,
		reply{lines: []string{`data: {"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}` + "\n\n"}},
		reply{lines: sse(chunk(`{"content":"second try"}`, "stop"))},
	)
	c, _ := testClient(t, srv, nil)
	resp, err := c.Chat(context.Background(), userRequest("q"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "second try" || f.requests() != 2 {
		t.Errorf("content %q requests %d", resp.Message.Content, f.requests())
	}
}

func TestChatMalformedChunkFails(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{lines: []string{"data: " + chunk(`{"content":"Hel"}`, "") + "\n\n", "data: {\"id\":\"chatcmpl-9xQ\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"\n\n"}})
	c, _ := testClient(t, srv, nil)
	_, err := c.Chat(context.Background(), userRequest("q"), nil)
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrInterrupted) || f.requests() != 1 {
		t.Fatalf("err = %v, requests %d", err, f.requests())
	}
	// Before any delta, a malformed stream is a protocol error, not retried.
	f2, srv2 := newFakeEndpoint(t, reply{lines: []string{"data: {not json}\n\n"}})
	c2, _ := testClient(t, srv2, nil)
	_, err = c2.Chat(context.Background(), userRequest("q"), nil)
	if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrInterrupted) || f2.requests() != 1 {
		t.Fatalf("err = %v, requests %d", err, f2.requests())
	}
}

func TestChatNeverReplaysAHalfDeliveredStream(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t,
		reply{lines: []string{"data: " + chunk(`{"content":"partial"}`, "") + "\n\n"}, hangup: true},
		reply{lines: sse(chunk(`{"content":"replayed"}`, "stop"))},
	)
	c, _ := testClient(t, srv, nil)
	var got strings.Builder
	_, err := c.Chat(context.Background(), userRequest("q"), func(d Delta) error { got.WriteString(d.Text); return nil })
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInterrupted || f.requests() != 1 {
		t.Fatalf("err = %v, requests %d", err, f.requests())
	}
	if got.String() != "partial" {
		t.Errorf("delivered %q", got.String())
	}
}

func TestChatTruncatedStreamBeforeDeltasIsRetried(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t,
		reply{lines: []string{"data: " + chunk(`{"role":"assistant","content":""}`, "") + "\n\n"}, hangup: true},
		reply{lines: sse(chunk(`{"content":"whole"}`, "stop"))},
	)
	c, _ := testClient(t, srv, nil)
	resp, err := c.Chat(context.Background(), userRequest("q"), nil)
	if err != nil || resp.Message.Content != "whole" || f.requests() != 2 {
		t.Fatalf("resp %+v err %v requests %d", resp, err, f.requests())
	}
}

func TestChatCancelMidStream(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{lines: []string{"data: " + chunk(`{"content":"thinking"}`, "") + "\n\n"}, block: true})
	c, _ := testClient(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, userRequest("q"), func(d Delta) error {
			if d.Text != "" {
				close(first)
			}
			return nil
		})
		done <- err
	}()
	<-first
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCanceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Chat did not return after cancellation")
	}
	select {
	case <-f.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the stream close")
	}
	if f.requests() != 1 {
		t.Errorf("requests %d", f.requests())
	}
}

func TestChatCallbackErrorStopsTheStream(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{lines: []string{"data: " + chunk(`{"content":"a"}`, "") + "\n\n"}, block: true})
	c, _ := testClient(t, srv, nil)
	stop := errors.New("client went away")
	_, err := c.Chat(context.Background(), userRequest("q"), func(Delta) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-f.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream was not closed")
	}
}

func TestChatStallIsATimeout(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{stalled: true}, reply{lines: sse(chunk(`{"content":"late"}`, "stop"))})
	c, _ := testClient(t, srv, func(c *Config) { c.FirstByteTimeout = 50 * time.Millisecond })
	resp, err := c.Chat(context.Background(), userRequest("q"), nil)
	if err != nil || resp.Attempts != 2 || f.requests() != 2 {
		t.Fatalf("resp %+v err %v", resp, err)
	}

	// Silence after a delta: an interrupted call caused by a timeout.
	_, srv2 := newFakeEndpoint(t, reply{lines: []string{"data: " + chunk(`{"content":"a"}`, "") + "\n\n"}, block: true})
	c2, _ := testClient(t, srv2, func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	_, err = c2.Chat(context.Background(), userRequest("q"), nil)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
}

func TestCompleteNonStreaming(t *testing.T) {
	t.Parallel()

	f, srv := newFakeEndpoint(t, reply{lines: []string{`{"id":"chatcmpl-1","object":"chat.completion","created":1727712000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"*.csv\"}"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":12,"total_tokens":62}}`}})
	c, _ := testClient(t, srv, nil)
	resp, err := c.Complete(context.Background(), userRequest("list files"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0] != (ToolCall{ID: "call_a", Name: "glob", Arguments: `{"pattern":"*.csv"}`}) {
		t.Errorf("tool calls %+v", resp.Message.ToolCalls)
	}
	if resp.FinishReason != FinishToolCalls || resp.Usage.TotalTokens != 62 || !resp.UsageReported {
		t.Errorf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
	if f.body(0)["stream"] != false || f.body(0)["stream_options"] != nil {
		t.Errorf("non-streaming request body %v", f.body(0))
	}
}

func TestRequestOptionsAndValidation(t *testing.T) {
	t.Parallel()

	zero, one := float32(0), float32(0.7)
	no := false
	f, srv := newFakeEndpoint(t, reply{lines: sse(chunk(`{"content":"x"}`, "stop"))})
	c, _ := testClient(t, srv, func(c *Config) {
		c.Defaults = Options{Temperature: &one, MaxTokens: 1000}
		c.Models = map[string]Options{"small": {Temperature: &zero, ParallelToolCalls: &no}}
	})
	req := userRequest("q")
	req.Model = "small"
	req.Tools = []Tool{{Name: "glob"}}
	req.ToolChoice = "glob"
	if _, err := c.Chat(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	b := f.body(0)
	if b["model"] != "small" || b["max_tokens"] != float64(1000) || b["parallel_tool_calls"] != false {
		t.Errorf("body %v", b)
	}
	if temp, ok := b["temperature"].(float64); !ok || temp <= 0 || temp > 1e-30 {
		t.Errorf("temperature 0 sent as %v", b["temperature"])
	}
	if tc, _ := b["tool_choice"].(map[string]any); tc["type"] != "function" {
		t.Errorf("tool_choice %v", b["tool_choice"])
	}

	bad := []Request{
		{},
		{Messages: []Message{{Role: "robot", Content: "x"}}},
		{Messages: []Message{{Role: RoleTool, Content: "x"}}},
		{Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "glob"}}}}},
		{Messages: []Message{{Role: RoleUser, Content: "x"}}, Tools: []Tool{{Name: "t", Parameters: json.RawMessage(`{`)}}},
	}
	for i, r := range bad {
		if _, err := c.Chat(context.Background(), r, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("bad request %d: err = %v", i, err)
		}
	}
	if f.requests() != 1 {
		t.Errorf("invalid requests reached the endpoint: %d", f.requests())
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()

	hot := float32(3)
	for _, cfg := range []Config{
		{},
		{BaseURL: "ftp://x", Model: "m"},
		{BaseURL: "http://x/v1"},
		{BaseURL: "http://x/v1", Model: "m", Defaults: Options{Temperature: &hot}},
		{BaseURL: "http://x/v1", Model: "m", HTTPClient: &http.Client{Timeout: time.Second}},
		{BaseURL: "http://x/v1", Model: "m", Retry: RetryPolicy{MaxAttempts: -1}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{"3": 3 * time.Second, "0.5": 500 * time.Millisecond, "": 0, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second}
	for v, want := range cases {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := ParseRetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q = %v, want %v", v, got, want)
		}
	}
	h := http.Header{}
	h.Set("retry-after-ms", "250")
	h.Set("Retry-After", "9")
	if got := ParseRetryAfter(h, now); got != 250*time.Millisecond {
		t.Errorf("retry-after-ms = %v", got)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()

	p := RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 4 * time.Second}
	for n, want := range map[int][2]time.Duration{1: {500 * time.Millisecond, time.Second}, 2: {time.Second, 2 * time.Second}, 3: {2 * time.Second, 4 * time.Second}, 9: {2 * time.Second, 4 * time.Second}} {
		if lo := backoff(p, n, func() float64 { return 0 }); lo != want[0] {
			t.Errorf("retry %d low = %v, want %v", n, lo, want[0])
		}
		if hi := backoff(p, n, func() float64 { return 0.999999999 }); hi < want[1]-time.Millisecond || hi > want[1] {
			t.Errorf("retry %d high = %v, want %v", n, hi, want[1])
		}
	}
}

// A provider that quotes the key in its error must not get the key into
// the error the caller logs and shows (found by test/reliability/security).
func TestErrorsNeverQuoteTheAPIKey(t *testing.T) {
	t.Parallel()

	const key = "sk-live-0123456789abcdefSECRET"
	for _, tc := range []struct {
		name string
		r    reply
	}{
		{"json 401", reply{status: 401, lines: []string{`{"error":{"message":"Incorrect API key provided: ` + key + `.","type":"invalid_request_error","code":"invalid_api_key"}}`}}},
		{"plain 403", reply{status: 403, lines: []string{"forbidden for key " + key}}},
		{"plain 500", reply{status: 500, lines: []string{"upstream rejected " + key}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newFakeEndpoint(t, tc.r, tc.r, tc.r, tc.r, tc.r, tc.r)
			c, _ := testClient(t, srv, func(cfg *Config) { cfg.APIKey = key })
			_, err := c.Chat(context.Background(), userRequest("q"), nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(e.Message, "SECRET") {
				t.Fatalf("the error quotes the API key: %v", err)
			}
			if !strings.Contains(err.Error(), redacted) {
				t.Fatalf("the error no longer says what the provider said: %v", err)
			}
		})
	}
}
