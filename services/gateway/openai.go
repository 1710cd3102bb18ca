package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// OpenAI-compatible Chat Completions: POST /v1/chat/completions and GET
// /v1/models. A completion is one turn of a conversation (chatrun.go):
// the final answer is the assistant message, thoughts are
// reasoning_content, and every event of the turn is in the extra
// `baagent` field that standard clients ignore.

// openAIRequest is the part of a Chat Completions request the gateway
// reads; other fields (temperature, tools, ...) are accepted and ignored,
// since the agent configuration decides them.
type openAIRequest struct {
	Model         string            `json:"model"`
	Messages      []openAIMessage   `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *openAIStreamOpts `json:"stream_options"`
	User          string            `json:"user"`
	Metadata      map[string]string `json:"metadata"`
}

type openAIStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type openAIMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatLine is one earlier message of a conversation the client sent whole.
type chatLine struct{ role, text string }

// chatPrompt is what a chat request's messages mean for a run.
type chatPrompt struct {
	input        string     // the last user message
	history      []chatLine // user and assistant messages before it
	systemPrompt string     // system and developer messages, joined
}

// parseOpenAIRequest decodes and checks a Chat Completions body.
func parseOpenAIRequest(data []byte) (openAIRequest, chatPrompt, error) {
	var req openAIRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return req, chatPrompt{}, fieldError("body", "invalid JSON for a chat completion request: "+err.Error())
	}
	if req.Model == "" {
		return req, chatPrompt{}, fieldError("model", "required: the agent configuration (GET /v1/models lists them)")
	}
	var p chatPrompt
	var system []string
	for i, m := range req.Messages {
		field := "messages[" + strconv.Itoa(i) + "]"
		text, err := openAIContent(field+".content", m.Content)
		if err != nil {
			return req, chatPrompt{}, err
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "user", "assistant":
			p.history = append(p.history, chatLine{m.Role, text})
		case "tool", "function":
			// Results of client-side tools: the agent runs its own tools.
			return req, chatPrompt{}, fieldError(field+".role", "tool messages are not accepted: the agent runs its own tools")
		default:
			return req, chatPrompt{}, fieldError(field+".role", "must be system, developer, user or assistant")
		}
	}
	n := len(p.history)
	if n == 0 || p.history[n-1].role != "user" {
		return req, chatPrompt{}, fieldError("messages", "the last message must be a user message (the request to run)")
	}
	p.input, p.history = p.history[n-1].text, p.history[:n-1]
	if strings.TrimSpace(p.input) == "" {
		return req, chatPrompt{}, fieldError("messages["+strconv.Itoa(len(req.Messages)-1)+"].content", "required: the user message is empty")
	}
	p.systemPrompt = strings.Join(system, "\n\n")
	return req, p, nil
}

// openAIContent is a message's text: a string, or text parts. Other
// parts (images, audio) are refused, not silently dropped.
func openAIContent(field string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fieldError(field, "must be a string or an array of text parts")
	}
	var b strings.Builder
	for i, part := range parts {
		if part.Type != "text" {
			return "", fieldError(field+"["+strconv.Itoa(i)+"].type", "only text parts are supported, got "+strconv.Quote(part.Type))
		}
		b.WriteString(part.Text)
	}
	return b.String(), nil
}

// runInput is the input of a new run: the request, preceded by the
// earlier messages when the client sent a conversation the server does
// not hold (no conversation id), so the agent sees what was said.
func runInput(p chatPrompt, continuing bool) string {
	if continuing || len(p.history) == 0 {
		return p.input
	}
	var b strings.Builder
	b.WriteString("Conversation so far:\n")
	for _, l := range p.history {
		b.WriteString("\n[" + l.role + "]\n" + l.text + "\n")
	}
	b.WriteString("\nCurrent request:\n")
	b.WriteString(p.input)
	return b.String()
}

// openAIModel is one entry of GET /v1/models.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type openAIModelList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

func (s *Server) httpOpenAIModels(w http.ResponseWriter, r *http.Request) {
	c, err := s.httpCaller(r, false)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	done, err := s.hold(c, s.inFlight, apiHTTP)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	defer done()
	list := openAIModelList{Object: "list", Data: []openAIModel{}}
	for _, m := range s.opts.Models {
		list.Data = append(list.Data, openAIModel{ID: m, Object: "model", OwnedBy: "baagent"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// checkModel refuses a model the gateway does not serve (404, as OpenAI).
func (s *Server) checkModel(model string) error {
	if len(s.opts.Models) == 0 || model == "" || slices.Contains(s.opts.Models, model) {
		return nil
	}
	return status.Errorf(codes.NotFound, "The model %s does not exist: GET /v1/models lists the models served", strconv.Quote(model))
}

// baagentExtra is the `baagent` field of a completion or chunk.
type baagentExtra struct {
	RunID          string            `json:"run_id"`
	ConversationID string            `json:"conversation_id"`
	State          string            `json:"state,omitempty"`
	Cursor         string            `json:"cursor,omitempty"`
	Events         []json.RawMessage `json:"events,omitempty"`
	Event          json.RawMessage   `json:"event,omitempty"`
	PendingInput   *pendingQuestion  `json:"pending_input,omitempty"`
}

type openAIUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type openAIOutMessage struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

type openAIChoice struct {
	Index        int               `json:"index"`
	Message      *openAIOutMessage `json:"message,omitempty"`
	Delta        *openAIOutMessage `json:"delta,omitempty"`
	FinishReason *string           `json:"finish_reason"`
}

type openAICompletion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
	Usage   *openAIUsage   `json:"usage,omitempty"`
	Baagent *baagentExtra  `json:"baagent,omitempty"`
}

// openAIErrorBody is OpenAI's error shape, with the run when there is one.
type openAIErrorBody struct {
	Error   openAIError   `json:"error"`
	Baagent *baagentExtra `json:"baagent,omitempty"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// openAIErrorOf renders a gRPC status as OpenAI's error object.
func openAIErrorOf(err error) (openAIError, *status.Status, int, int) {
	st, code, field, retry := statusInfo(err)
	e := openAIError{Message: st.Message(), Code: strings.ToLower(codeName(st.Code()))}
	if field != "" {
		e.Param = &field
	}
	switch {
	case code == http.StatusUnauthorized:
		e.Type, e.Code = "authentication_error", "invalid_api_key"
	case code == http.StatusForbidden:
		e.Type = "permission_error"
	case code == http.StatusTooManyRequests:
		e.Type, e.Code = "rate_limit_error", "rate_limit_exceeded"
	case code == http.StatusNotFound && field == "" && strings.HasPrefix(st.Message(), "The model "):
		e.Type, e.Code = "invalid_request_error", "model_not_found"
	case code < 500:
		e.Type = "invalid_request_error"
	default:
		e.Type = "server_error"
	}
	return e, st, code, retry
}

func writeOpenAIError(w http.ResponseWriter, err error) {
	e, st, code, retry := openAIErrorOf(err)
	setErrorHeaders(w, st, retry)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(openAIErrorBody{Error: e})
}

func (s *Server) httpOpenAIChat(w http.ResponseWriter, r *http.Request) {
	c, done, ok := s.admit(w, r, s.streamSlots, writeOpenAIError)
	if !ok {
		return
	}
	defer done()
	data, err := s.readLimited(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	req, prompt, err := parseOpenAIRequest(data)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	start, err := s.startTurn(r.WithContext(withKeyID(r.Context(), c)), c.tenant, interfaceOpenAI, req.Model, prompt, [2]string{"metadata.conversation_id", req.Metadata["conversation_id"]}, [2]string{"user", req.User})
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	run := start.run
	w.Header().Set(HeaderConversationID, run.GetConversationId())
	w.Header().Set("X-Baagent-Run-Id", run.GetRunId())
	base := openAICompletion{ID: "chatcmpl-" + run.GetRunId(), Created: time.Now().Unix(), Model: req.Model}
	extra := baagentExtra{RunID: run.GetRunId(), ConversationID: run.GetConversationId()}
	if req.Stream {
		s.streamOpenAI(w, r, c.tenant, start, base, extra, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	sink := &openAICollector{}
	end, err := s.followTurn(r.Context(), c.tenant, run.GetRunId(), start.after, sink)
	extra.Events, extra.Cursor = sink.events, end.cursor
	if err != nil {
		s.writeOpenAIRunError(w, err, extra)
		return
	}
	if err := runFailure(end); err != nil {
		s.writeOpenAIRunError(w, err, extra)
		return
	}
	content := sink.answer
	extra.State = "completed"
	if end.question != nil {
		content, extra.State, extra.PendingInput = end.question.text(), "waiting_input", end.question
	} else if end.last == nil || !end.last.Terminal {
		// The run's events ended without its terminal event (expired).
		s.writeOpenAIRunError(w, status.Error(codes.DataLoss, "the run's events are no longer retained; read the run with GET /v1/runs/{run_id}"), extra)
		return
	}
	out := base
	out.Object = "chat.completion"
	msg := &openAIOutMessage{Role: "assistant", Content: &content}
	if sink.reasoning.Len() > 0 {
		rc := sink.reasoning.String()
		msg.ReasoningContent = &rc
	}
	out.Choices = []openAIChoice{{Message: msg, FinishReason: ptr("stop")}}
	out.Usage = &sink.usage
	out.Baagent = &extra
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// runFailure is the error of a run that failed or was cancelled.
func runFailure(end turnEnd) error {
	if end.last == nil {
		return nil
	}
	ev := end.last.Event
	switch {
	case ev.GetError() != nil:
		msg := ev.GetError().GetMessage()
		if c := ev.GetError().GetCode(); c != "" {
			msg = c + ": " + msg
		}
		return status.Error(codes.Internal, "the run failed: "+msg)
	case ev.GetCancelled() != nil:
		return status.Error(codes.Aborted, "the run was cancelled: "+ev.GetCancelled().GetReason())
	}
	return nil
}

func (s *Server) writeOpenAIRunError(w http.ResponseWriter, err error, extra baagentExtra) {
	e, st, code, retry := openAIErrorOf(err)
	setErrorHeaders(w, st, retry)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(openAIErrorBody{Error: e, Baagent: &extra})
}

// openAICollector gathers a non-streamed completion.
type openAICollector struct {
	events    []json.RawMessage
	answer    string
	reasoning strings.Builder
	thoughts  bool // thought_delta seen since the last thought
	usage     openAIUsage
}

func (o *openAICollector) heartbeat() error { return nil }

func (o *openAICollector) event(e *hub.Entry, _ *pendingQuestion) error {
	o.events = append(o.events, json.RawMessage(e.JSON))
	ev := e.Event
	switch {
	case ev.GetThoughtDelta() != nil:
		o.reasoning.WriteString(ev.GetThoughtDelta().GetDelta())
		o.thoughts = true
	case ev.GetThought() != nil:
		// A thought repeats what its deltas streamed, if any.
		if !o.thoughts {
			if o.reasoning.Len() > 0 {
				o.reasoning.WriteString("\n")
			}
			o.reasoning.WriteString(ev.GetThought().GetThought())
		}
		o.thoughts = false
	case ev.GetCostUpdate() != nil:
		o.usage = usageOf(ev.GetCostUpdate())
	case ev.GetComplete() != nil:
		o.answer = ev.GetComplete().GetContent()
	}
	return nil
}

func usageOf(c *baagentv1.CostUpdatePayload) openAIUsage {
	return openAIUsage{
		PromptTokens:     c.GetTotalInputTokens(),
		CompletionTokens: c.GetTotalOutputTokens(),
		TotalTokens:      c.GetTotalInputTokens() + c.GetTotalOutputTokens(),
	}
}

// openAIStreamer writes a streamed completion: one chunk per event.
type openAIStreamer struct {
	out      *chatSSE
	base     openAICompletion
	extra    baagentExtra
	usage    openAIUsage
	text     bool // a text delta was streamed
	thoughts bool
}

func (o *openAIStreamer) chunk(delta *openAIOutMessage, finish *string, extra *baagentExtra) error {
	c := o.base
	c.Object = "chat.completion.chunk"
	if delta == nil {
		delta = &openAIOutMessage{}
	}
	c.Choices = []openAIChoice{{Delta: delta, FinishReason: finish}}
	c.Baagent = extra
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return o.out.data(b)
}

func (o *openAIStreamer) heartbeat() error { return o.out.comment() }

func (o *openAIStreamer) event(e *hub.Entry, ask *pendingQuestion) error {
	ev := e.Event
	delta := &openAIOutMessage{}
	switch {
	case ev.GetTextDelta() != nil:
		delta.Content = ptr(ev.GetTextDelta().GetDelta())
		o.text = true
	case ev.GetThoughtDelta() != nil:
		delta.ReasoningContent = ptr(ev.GetThoughtDelta().GetDelta())
		o.thoughts = true
	case ev.GetThought() != nil:
		if !o.thoughts {
			delta.ReasoningContent = ptr(ev.GetThought().GetThought() + "\n")
		}
		o.thoughts = false
	case ev.GetCostUpdate() != nil:
		o.usage = usageOf(ev.GetCostUpdate())
	case ev.GetComplete() != nil && !o.text:
		delta.Content = ptr(ev.GetComplete().GetContent())
	}
	if ask != nil {
		delta.Content = ptr(ask.text())
	}
	return o.chunk(delta, nil, &baagentExtra{RunID: o.extra.RunID, ConversationID: o.extra.ConversationID, Cursor: e.Cursor, Event: json.RawMessage(e.JSON)})
}

func (s *Server) streamOpenAI(w http.ResponseWriter, r *http.Request, tenant string, start turnStart, base openAICompletion, extra baagentExtra, includeUsage bool) {
	o := &openAIStreamer{out: newChatSSE(w, s.opts.WriteTimeout), base: base, extra: extra}
	if err := o.chunk(&openAIOutMessage{Role: "assistant", Content: ptr("")}, nil, &extra); err != nil {
		return
	}
	end, err := s.followTurn(r.Context(), tenant, start.run.GetRunId(), start.after, o)
	if err == nil {
		err = runFailure(end)
	}
	if err == nil && end.question == nil && (end.last == nil || !end.last.Terminal) {
		err = status.Error(codes.DataLoss, "the run's events are no longer retained; read the run with GET /v1/runs/{run_id}")
	}
	final := extra
	final.Cursor = end.cursor
	if err != nil {
		// OpenAI's clients raise an error for a chunk with an `error`.
		e, _, _, _ := openAIErrorOf(err)
		b, _ := json.Marshal(openAIErrorBody{Error: e, Baagent: &final})
		_ = o.out.data(b)
		_ = o.out.data([]byte("[DONE]"))
		return
	}
	final.State = "completed"
	if end.question != nil {
		final.State, final.PendingInput = "waiting_input", end.question
	}
	if o.chunk(nil, ptr("stop"), &final) != nil {
		return
	}
	if includeUsage {
		c := o.base
		c.Object = "chat.completion.chunk"
		c.Choices = []openAIChoice{}
		c.Usage = &o.usage
		if b, err := json.Marshal(c); err == nil && o.out.data(b) != nil {
			return
		}
	}
	_ = o.out.data([]byte("[DONE]"))
}

func ptr[T any](v T) *T { return &v }
