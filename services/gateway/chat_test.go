package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// SubmitInput answers a waiting run of the fake: it records the answer and
// puts the run back to RUNNING.
func (f *fakeOrchestrator) SubmitInput(_ context.Context, req *baagentv1.OrchestratorServiceSubmitInputRequest) (*baagentv1.OrchestratorServiceSubmitInputResponse, error) {
	if err := f.failure("SubmitInput"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	run, ok := f.runs[req.Tenant+"/"+req.RunId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "run %s not found", req.RunId)
	}
	if run.State != baagentv1.RunState_RUN_STATE_WAITING_INPUT {
		return nil, status.Error(codes.FailedPrecondition, "the run is not waiting for input")
	}
	run.State = baagentv1.RunState_RUN_STATE_RUNNING
	run.PendingInput = nil
	run.Labels = map[string]string{"answer": req.GetInput().GetAnswer(), "input_id": req.GetInput().GetInputId()}
	return &baagentv1.OrchestratorServiceSubmitInputResponse{Run: run}, nil
}

func (f *fakeOrchestrator) get(tenant, id string) *baagentv1.Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[tenant+"/"+id]
}

// publishTurn publishes a run's whole turn: start, a thought streamed in
// two deltas, its full thought, text, a tool call and its result, a cost
// update and the answer.
func publishTurn(ctx context.Context, t *testing.T, r *natstest.Run, answer string) {
	t.Helper()
	input, _ := structpb.NewStruct(map[string]any{"query": "SELECT 1"})
	for _, ev := range []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "q", Model: "m"}}},
		{Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: "think "}}},
		{Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: "hard"}}},
		{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: "think hard"}}},
		{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "Querying. "}}},
		{Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call-1", ToolName: "sql_query", ToolInput: input}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call-1", ToolName: "sql_query", Observation: "1", Success: true}}},
		{Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call-0", ToolName: "grep", Observation: "no call seen", Success: true}}},
		{Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{TotalInputTokens: 100, TotalOutputTokens: 20}}},
		{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: answer}}},
	} {
		if _, err := r.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Complete(ctx, answer); err != nil {
		t.Fatal(err)
	}
}

func post(ctx context.Context, t *testing.T, url, key, body string, header http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// sseData reads the data lines of a data-only SSE response.
func sseData(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const chatBody = `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"q"}]}]}`

func TestOpenAIChatCompletion(t *testing.T) {
	e := newEnv(t, Options{Models: []string{"m"}})
	ctx := testCtx(t)
	publishTurn(ctx, t, natstest.NewRun(e.js, "acme", "run-1"), "The answer.")
	resp := post(ctx, t, e.base+"/v1/chat/completions", keyAcme, chatBody, http.Header{"Idempotency-Key": {"k-1"}})
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get(HeaderConversationID); got != "conv-run-1" {
		t.Errorf("conversation header = %q", got)
	}
	var out struct {
		openAICompletion
		Choices []struct {
			Message      map[string]string `json:"message"`
			FinishReason string            `json:"finish_reason"`
		} `json:"choices"`
		Baagent struct {
			RunID  string            `json:"run_id"`
			Events []json.RawMessage `json:"events"`
			Cursor string            `json:"cursor"`
		} `json:"baagent"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	msg := out.Choices[0].Message
	if out.Object != "chat.completion" || msg["content"] != "The answer." || msg["reasoning_content"] != "think hard" || out.Choices[0].FinishReason != "stop" {
		t.Errorf("completion = %+v", out)
	}
	if out.Usage == nil || out.Usage.TotalTokens != 120 {
		t.Errorf("usage = %+v", out.Usage)
	}
	if len(out.Baagent.Events) != 11 || out.Baagent.RunID != "run-1" || out.Baagent.Cursor != "11" {
		t.Errorf("baagent = %d events, run %q, cursor %q", len(out.Baagent.Events), out.Baagent.RunID, out.Baagent.Cursor)
	}
	run := e.orch.get("acme", "run-1")
	if run.Labels[LabelInterface] != interfaceOpenAI || run.Input != "q" || run.Model != "m" {
		t.Errorf("run = %v", run)
	}
}

func TestOpenAIChatStream(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	publishTurn(ctx, t, natstest.NewRun(e.js, "acme", "run-1"), "The answer.")
	body := strings.Replace(chatBody, `"model":"m"`, `"model":"m","stream":true,"stream_options":{"include_usage":true}`, 1)
	resp := post(ctx, t, e.base+"/v1/chat/completions", keyAcme, body, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	data := sseData(t, resp)
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last data %q", data[len(data)-1])
	}
	var content, reasoning, finish string
	var events int
	var usage *openAIUsage
	for _, d := range data[:len(data)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta        map[string]string `json:"delta"`
				FinishReason *string           `json:"finish_reason"`
			} `json:"choices"`
			Usage   *openAIUsage `json:"usage"`
			Baagent *struct {
				Event json.RawMessage `json:"event"`
			} `json:"baagent"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		if len(c.Choices) > 0 {
			content += c.Choices[0].Delta["content"]
			reasoning += c.Choices[0].Delta["reasoning_content"]
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
		if c.Baagent != nil && c.Baagent.Event != nil {
			events++
		}
	}
	if content != "Querying. The answer." || reasoning != "think hard" || finish != "stop" || events != 11 {
		t.Errorf("content %q, reasoning %q, finish %q, events %d", content, reasoning, finish, events)
	}
	if usage == nil || usage.TotalTokens != 120 {
		t.Errorf("usage %+v", usage)
	}
}

// A request in a conversation whose run waits on a question answers it.
func TestOpenAIChatAnswersWaitingRun(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := natstest.NewRun(e.js, "acme", "run-w")
	r.ConversationID = "c1"
	q := &baagentv1.ClarificationQuestion{QuestionId: "q1", Question: "Which?", Options: []*baagentv1.ClarificationOption{{Label: "A"}, {Label: "B"}}}
	for _, ev := range []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Input: "q"}}},
		{Payload: &baagentv1.Event_ClarificationAsked{ClarificationAsked: q}},
	} {
		if _, err := r.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	e.orch.put(&baagentv1.Run{RunId: "run-w", Tenant: "acme", ConversationId: "c1", State: baagentv1.RunState_RUN_STATE_WAITING_INPUT,
		LastSeq: 2, PendingInput: &baagentv1.PendingInput{Question: &baagentv1.PendingInput_Clarification{Clarification: q}}})

	// A turn following the run stops at the question.
	sub, err := e.srv.followTurn(ctx, "acme", "run-w", "0", &openAICollector{})
	if err != nil || sub.question == nil || sub.question.InputID != "q1" || sub.question.text() != "Which?\n\nOptions: A · B" || sub.cursor != "2" {
		t.Fatalf("followTurn = %+v, %v", sub, err)
	}

	if _, err := r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: &baagentv1.ClarificationAnsweredPayload{QuestionId: "q1", Answer: "b"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Complete(ctx, "Done with B."); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Which?"},{"role":"user","content":"b"}]}`
	resp := post(ctx, t, e.base+"/v1/chat/completions", keyAcme, body, http.Header{HeaderConversationID: {"c1"}})
	var out struct {
		Choices []struct {
			Message map[string]string `json:"message"`
		} `json:"choices"`
		Baagent baagentExtra `json:"baagent"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Baagent.RunID != "run-w" || len(out.Baagent.Events) != 2 || out.Choices[0].Message["content"] != "Done with B." {
		t.Errorf("answered turn = %+v", out)
	}
	// Replayed now, the answered question is passed over: the turn runs
	// to the end.
	all, err := e.srv.followTurn(ctx, "acme", "run-w", "0", &openAICollector{})
	if err != nil || all.question != nil || all.cursor != "4" {
		t.Errorf("replay = %+v, %v", all, err)
	}
	run := e.orch.get("acme", "run-w")
	// The answer matched an option case-insensitively.
	if run.Labels["answer"] != "b" || run.Labels["input_id"] != "q1" {
		t.Errorf("SubmitInput got %v", run.Labels)
	}
}

func TestOpenAIChatErrors(t *testing.T) {
	e := newEnv(t, Options{Models: []string{"m"}})
	ctx := testCtx(t)
	for _, tc := range []struct {
		name, key, body string
		header          http.Header
		status          int
		typ, code       string
		param           string
	}{
		{"no key", "", chatBody, nil, 401, "authentication_error", "invalid_api_key", ""},
		{"bad key", "nope-0123456789abcdef", chatBody, nil, 401, "authentication_error", "invalid_api_key", ""},
		{"unknown model", keyAcme, strings.Replace(chatBody, `"m"`, `"gpt-x"`, 1), nil, 404, "invalid_request_error", "model_not_found", ""},
		{"no model", keyAcme, `{"messages":[{"role":"user","content":"q"}]}`, nil, 400, "invalid_request_error", "invalid_argument", "model"},
		{"bad json", keyAcme, `{"model":`, nil, 400, "invalid_request_error", "invalid_argument", "body"},
		{"no user message", keyAcme, `{"model":"m","messages":[{"role":"assistant","content":"hi"}]}`, nil, 400, "invalid_request_error", "invalid_argument", "messages"},
		{"image part", keyAcme, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, nil, 400, "invalid_request_error", "invalid_argument", "messages[0].content[0].type"},
		{"tool message", keyAcme, `{"model":"m","messages":[{"role":"tool","content":"x"},{"role":"user","content":"q"}]}`, nil, 400, "invalid_request_error", "invalid_argument", "messages[0].role"},
		{"bad conversation", keyAcme, chatBody, http.Header{HeaderConversationID: {"../x"}}, 400, "invalid_request_error", "invalid_argument", HeaderConversationID},
		{"bad user", keyAcme, strings.Replace(chatBody, `"model":"m"`, `"model":"m","user":"a b"`, 1), nil, 400, "invalid_request_error", "invalid_argument", "user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(ctx, t, e.base+"/v1/chat/completions", tc.key, tc.body, tc.header)
			var out struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			param := ""
			if out.Error.Param != nil {
				param = *out.Error.Param
			}
			if resp.StatusCode != tc.status || out.Error.Type != tc.typ || out.Error.Code != tc.code || param != tc.param || out.Error.Message == "" {
				t.Errorf("got %d %+v param %q", resp.StatusCode, out.Error, param)
			}
		})
	}
	// No run was started by any of them.
	if e.orch.get("acme", "run-1") != nil {
		t.Error("a refused request started a run")
	}
}

func TestOpenAIChatRunFailed(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := natstest.NewRun(e.js, "acme", "run-1")
	if _, err := r.Publish(ctx, &baagentv1.Event{Payload: &baagentv1.Event_Error{Error: &baagentv1.ErrorPayload{Code: "MAX_STEPS", Message: "too many steps"}}}); err != nil {
		t.Fatal(err)
	}
	resp := post(ctx, t, e.base+"/v1/chat/completions", keyAcme, chatBody, nil)
	var out openAIErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || out.Error.Type != "server_error" || !strings.Contains(out.Error.Message, "MAX_STEPS") || out.Baagent == nil || len(out.Baagent.Events) != 1 {
		t.Errorf("got %d %+v", resp.StatusCode, out)
	}
}

func TestOpenAIModels(t *testing.T) {
	e := newEnv(t, Options{Models: []string{"m1", "m2"}})
	ctx := testCtx(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out openAIModelList
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "list" || len(out.Data) != 2 || out.Data[1].ID != "m2" || out.Data[0].Object != "model" {
		t.Errorf("models = %+v", out)
	}
}

// uiChunks decodes a UI message stream's chunks (without [DONE]).
func uiChunks(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(aisdkHeader) != "v1" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, header %q: %s", resp.StatusCode, resp.Header.Get(aisdkHeader), b)
	}
	data := sseData(t, resp)
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last data %q", data[len(data)-1])
	}
	var out []map[string]any
	for _, d := range data[:len(data)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		out = append(out, m)
	}
	return out
}

func chunkTypes(chunks []map[string]any) string {
	var types []string
	for _, c := range chunks {
		if c["type"] != "data-baagent" {
			types = append(types, c["type"].(string))
		}
	}
	return strings.Join(types, " ")
}

func TestAISDKChat(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	r := natstest.NewRun(e.js, "acme", "run-1")
	r.ConversationID = "chat-1"
	publishTurn(ctx, t, r, "The answer.")
	body := `{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"q"}]}]}`
	chunks := uiChunks(t, post(ctx, t, e.base+"/v1/chat", keyAcme, body, nil))
	want := "start reasoning-start reasoning-delta reasoning-delta reasoning-end text-start text-delta text-end " +
		"tool-input-available tool-output-available data-cost text-start text-delta text-end finish"
	if got := chunkTypes(chunks); got != want {
		t.Errorf("chunks:\n got %s\nwant %s", got, want)
	}
	var events int
	for _, c := range chunks {
		if c["type"] == "data-baagent" {
			events++
		}
	}
	if events != 11 {
		t.Errorf("%d data-baagent parts, want 11", events)
	}
	run := e.orch.get("acme", "run-1")
	if run.ConversationId != "chat-1" || run.Labels[LabelInterface] != interfaceAISDK {
		t.Errorf("run = %v", run)
	}

	// The same run from a cursor: the events after it only.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/runs/run-1/ui-stream?cursor=9", nil)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	chunks = uiChunks(t, resp)
	if got := chunkTypes(chunks); got != "start text-start text-delta text-end finish" {
		t.Errorf("resumed chunks: %s", got)
	}
	if meta := chunks[len(chunks)-1]["messageMetadata"].(map[string]any); meta["cursor"] != "11" {
		t.Errorf("finish metadata %v", meta)
	}
}

func TestAISDKChatErrors(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	for name, body := range map[string]string{
		"no messages":    `{"id":"c"}`,
		"assistant last": `{"id":"c","messages":[{"role":"assistant","parts":[{"type":"text","text":"x"}]}]}`,
		"file part":      `{"id":"c","messages":[{"role":"user","parts":[{"type":"file"}]}]}`,
		"bad id":         `{"id":"a/b","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`,
	} {
		resp := post(ctx, t, e.base+"/v1/chat", keyAcme, body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", name, resp.StatusCode)
		}
	}
	if resp := post(ctx, t, e.base+"/v1/chat", "", `{}`, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: status %d", resp.StatusCode)
	}
}

func FuzzParseOpenAIRequest(f *testing.F) {
	f.Add([]byte(chatBody))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":null},{"role":"assistant","content":"a"},{"role":"user","content":"b"}],"stream":true,"metadata":{"conversation_id":"c"}}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, p, err := parseOpenAIRequest(data)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("error %v is not InvalidArgument", err)
			}
			return
		}
		if strings.TrimSpace(p.input) == "" {
			t.Fatal("accepted an empty input")
		}
		_ = runInput(p, false)
	})
}

func FuzzParseAISDKRequest(f *testing.F) {
	f.Add([]byte(`{"id":"c","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"q"}]}]}`))
	f.Add([]byte(`{"id":"c","messages":[{"role":"system","parts":[{"type":"text","text":"s"}]},{"role":"assistant","parts":[{"type":"tool-x"},{"type":"text","text":"a"}]},{"role":"user","parts":[{"type":"text","text":"q"}]}]}`))
	f.Add([]byte(`{"messages":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, p, err := parseAISDKRequest(data)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("error %v is not InvalidArgument", err)
			}
			return
		}
		if strings.TrimSpace(p.input) == "" {
			t.Fatal("accepted an empty input")
		}
		_ = runInput(p, false)
	})
}

// useChat's reconnect: the chat's run in progress, or 204.
func TestAISDKChatResume(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	get := func(path string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if resp := get("/v1/chat/chat-9/stream"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("no run: status %d", resp.StatusCode)
	}
	if resp := get("/v1/chat/a..b%2Fc/stream"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad chat id: status %d", resp.StatusCode)
	}
	r := e.run("acme", "run-9")
	r.ConversationID = "chat-9"
	publishTurn(ctx, t, r, "Resumed.")
	chunks := uiChunks(t, get("/v1/chat/chat-9/stream"))
	if got := chunkTypes(chunks); !strings.HasPrefix(got, "start reasoning-start") || !strings.HasSuffix(got, "text-end finish") {
		t.Errorf("chunks: %s", got)
	}
}
