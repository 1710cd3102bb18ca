package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// The AI SDK UI message stream (the protocol of the Vercel AI SDK's
// useChat default transport, v5 and later): POST /v1/chat runs a turn of
// the chat named by the body's id, GET /v1/runs/{run_id}/ui-stream streams
// an existing run. Both are Server-Sent Events of UI message chunks with
// the header x-vercel-ai-ui-message-stream: v1.

// aisdkRequest is the body useChat's DefaultChatTransport sends.
type aisdkRequest struct {
	ID       string           `json:"id"`
	Messages []aisdkUIMessage `json:"messages"`
	Model    string           `json:"model"`
}

type aisdkUIMessage struct {
	ID    string        `json:"id"`
	Role  string        `json:"role"`
	Parts []aisdkUIPart `json:"parts"`
}

type aisdkUIPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseAISDKRequest decodes and checks a useChat body.
func parseAISDKRequest(data []byte) (aisdkRequest, chatPrompt, error) {
	var req aisdkRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return req, chatPrompt{}, fieldError("body", "invalid JSON for a chat request: "+err.Error())
	}
	var p chatPrompt
	var system []string
	for i, m := range req.Messages {
		field := "messages[" + strconv.Itoa(i) + "]"
		var b strings.Builder
		for j, part := range m.Parts {
			switch {
			case part.Type == "text":
				b.WriteString(part.Text)
			case part.Type == "file" && m.Role == "user":
				return req, chatPrompt{}, fieldError(field+".parts["+strconv.Itoa(j)+"].type", "file parts are not supported; send text")
			}
			// Other parts (reasoning, tools, data, step-start) are what
			// the server streamed earlier; the conversation holds them.
		}
		switch m.Role {
		case "system":
			system = append(system, b.String())
		case "user", "assistant":
			p.history = append(p.history, chatLine{m.Role, b.String()})
		default:
			return req, chatPrompt{}, fieldError(field+".role", "must be system, user or assistant")
		}
	}
	n := len(p.history)
	if n == 0 || p.history[n-1].role != "user" {
		return req, chatPrompt{}, fieldError("messages", "the last message must be a user message (the request to run)")
	}
	p.input, p.history = p.history[n-1].text, p.history[:n-1]
	if strings.TrimSpace(p.input) == "" {
		return req, chatPrompt{}, fieldError("messages["+strconv.Itoa(len(req.Messages)-1)+"].parts", "required: the user message has no text")
	}
	p.systemPrompt = strings.Join(system, "\n\n")
	return req, p, nil
}

// aisdkHeader marks the response as a UI message stream.
const aisdkHeader = "x-vercel-ai-ui-message-stream"

func (s *Server) httpAISDKChat(w http.ResponseWriter, r *http.Request) {
	c, done, ok := s.admit(w, r, s.streamSlots, writeError)
	if !ok {
		return
	}
	defer done()
	data, err := s.readLimited(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	req, prompt, err := parseAISDKRequest(data)
	if err != nil {
		writeError(w, err)
		return
	}
	start, err := s.startTurn(r.WithContext(withKeyID(r.Context(), c)), c.tenant, interfaceAISDK, req.Model, prompt, [2]string{"id", req.ID})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set(HeaderConversationID, start.run.GetConversationId())
	s.streamAISDK(w, r, c.tenant, start.run.GetRunId(), start.run.GetConversationId(), start.after)
}

func (s *Server) httpAISDKRunStream(w http.ResponseWriter, r *http.Request) {
	c, runID, cursor, err := s.streamRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	done, err := s.hold(c, s.streamSlots, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	if cursor == "" {
		cursor = hub.FormatCursor(0) // from the run's first event
	}
	run, err := s.getRun(r.Context(), c.tenant, &baagentv1.GetRunRequest{RunId: runID})
	if err != nil {
		writeError(w, err)
		return
	}
	s.streamAISDK(w, r, c.tenant, runID, run.GetRun().GetConversationId(), cursor)
}

// httpAISDKChatResume is where useChat's transport reconnects (resume:
// true, after a page load): the chat's run in progress, from its first
// event, or 204 when none is.
func (s *Server) httpAISDKChatResume(w http.ResponseWriter, r *http.Request) {
	c, err := s.httpCaller(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	chatID := r.PathValue("chat_id")
	if err := validateTurn(chatTurn{conversationID: chatID}, "chat_id"); err != nil {
		writeError(w, err)
		return
	}
	done, err := s.hold(c, s.streamSlots, apiHTTP)
	if err != nil {
		writeError(w, err)
		return
	}
	defer done()
	if err := s.orchestratorReady(); err != nil {
		writeError(w, err)
		return
	}
	list, err := s.listRuns(r.Context(), c.tenant, &baagentv1.ListRunsRequest{
		ConversationId: chatID,
		States: []baagentv1.RunState{
			baagentv1.RunState_RUN_STATE_QUEUED, baagentv1.RunState_RUN_STATE_RUNNING, baagentv1.RunState_RUN_STATE_WAITING_INPUT,
		},
		PageSize: 1,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if len(list.GetRuns()) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	run := list.GetRuns()[0]
	w.Header().Set(HeaderConversationID, chatID)
	s.streamAISDK(w, r, c.tenant, run.GetRunId(), chatID, hub.FormatCursor(0))
}

// streamAISDK follows a turn and writes it as a UI message stream.
func (s *Server) streamAISDK(w http.ResponseWriter, r *http.Request, tenant, runID, conversationID, after string) {
	w.Header().Set(aisdkHeader, "v1")
	a := &aisdkStreamer{out: newChatSSE(w, s.opts.WriteTimeout)}
	if a.send(map[string]any{
		"type":            "start",
		"messageId":       "run-" + runID + "-" + after,
		"messageMetadata": map[string]string{"run_id": runID, "conversation_id": conversationID},
	}) != nil {
		return
	}
	end, err := s.followTurn(r.Context(), tenant, runID, after, a)
	if a.closeParts() != nil {
		return // the client is gone
	}
	if err == nil && end.question == nil && (end.last == nil || !end.last.Terminal) {
		err = status.Error(codes.DataLoss, "the run's events are no longer retained; read the run with GET /v1/runs/{run_id}")
	}
	if err != nil {
		if a.send(map[string]any{"type": "error", "errorText": status.Convert(err).Message()}) != nil {
			return
		}
	}
	meta := map[string]string{"run_id": runID, "conversation_id": conversationID, "cursor": end.cursor}
	if a.send(map[string]any{"type": "finish", "messageMetadata": meta}) != nil {
		return
	}
	_ = a.out.data([]byte("[DONE]"))
}

// aisdkStreamer maps a run's events to UI message chunks. Text and
// reasoning are parts opened by their first delta and closed by anything
// else; every event is also a data-baagent part with its cursor.
type aisdkStreamer struct {
	out       *chatSSE
	n         int    // parts opened, for their ids
	open      string // "text", "reasoning" or ""
	openID    string
	text      bool // text streamed in this turn
	reasoning bool // reasoning deltas since the last thought
	// tools are the tool calls whose input this stream carried: a
	// result is a tool part only for those (the AI SDK refuses a result
	// without its call; a stream resumed after the call carries the
	// result in its data-baagent part only).
	tools map[string]bool
}

// uiPartChunk is a part's start, delta or end chunk; uiDataChunk a data
// part. The frequent chunks are structs, not maps: per event and per
// client, the difference is most of the rendering's allocations.
type uiPartChunk struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type uiDeltaChunk struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Delta string `json:"delta"`
}

type uiDataChunk struct {
	Type string          `json:"type"`
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data"`
}

func (a *aisdkStreamer) send(chunk any) error {
	b, err := json.Marshal(chunk)
	if err != nil {
		return err
	}
	return a.out.data(b)
}

func (a *aisdkStreamer) heartbeat() error { return a.out.comment() }

// delta appends to the open part of kind, opening it first if needed.
func (a *aisdkStreamer) delta(kind, d string) error {
	if a.open != kind {
		if err := a.closeParts(); err != nil {
			return err
		}
		a.n++
		a.open, a.openID = kind, kind+"-"+strconv.Itoa(a.n)
		if err := a.send(uiPartChunk{Type: kind + "-start", ID: a.openID}); err != nil {
			return err
		}
	}
	return a.send(uiDeltaChunk{Type: a.open + "-delta", ID: a.openID, Delta: d})
}

func (a *aisdkStreamer) closeParts() error {
	if a.open == "" {
		return nil
	}
	kind, id := a.open, a.openID
	a.open, a.openID = "", ""
	return a.send(uiPartChunk{Type: kind + "-end", ID: id})
}

func (a *aisdkStreamer) event(e *hub.Entry, ask *pendingQuestion) error {
	if err := a.mapped(e, ask); err != nil {
		return err
	}
	return a.send(uiDataChunk{Type: "data-baagent", Data: e.JSON})
}

// mapped writes the chunks an event means in the UI message protocol.
func (a *aisdkStreamer) mapped(e *hub.Entry, ask *pendingQuestion) error {
	ev := e.Event
	if q := ask; q != nil {
		if err := a.delta("text", q.text()); err != nil {
			return err
		}
		if err := a.closeParts(); err != nil {
			return err
		}
		return a.send(map[string]any{"type": "data-pending-input", "data": q})
	}
	switch {
	case ev.GetTextDelta() != nil:
		a.text = true
		return a.delta("text", ev.GetTextDelta().GetDelta())
	case ev.GetThoughtDelta() != nil:
		a.reasoning = true
		return a.delta("reasoning", ev.GetThoughtDelta().GetDelta())
	case ev.GetThought() != nil:
		streamed := a.reasoning
		a.reasoning = false
		if streamed {
			return nil
		}
		if err := a.delta("reasoning", ev.GetThought().GetThought()); err != nil {
			return err
		}
		return a.closeParts()
	case ev.GetAct() != nil:
		if err := a.closeParts(); err != nil {
			return err
		}
		act := ev.GetAct()
		if act.GetParentToolCallId() != "" {
			// A tool composition's inner call: not a call of the model's
			// message, so no tool part (its observe is skipped as unseen).
			return nil
		}
		if a.tools == nil {
			a.tools = map[string]bool{}
		}
		a.tools[act.GetToolCallId()] = true
		var input any = act.GetRawArguments()
		if act.GetToolInput() != nil {
			input = act.GetToolInput().AsMap()
		}
		return a.send(map[string]any{"type": "tool-input-available", "toolCallId": act.GetToolCallId(), "toolName": act.GetToolName(), "input": input, "dynamic": true})
	case ev.GetObserve() != nil:
		if err := a.closeParts(); err != nil {
			return err
		}
		o := ev.GetObserve()
		if !a.tools[o.GetToolCallId()] {
			return nil
		}
		if !o.GetSuccess() {
			return a.send(map[string]any{"type": "tool-output-error", "toolCallId": o.GetToolCallId(), "errorText": o.GetObservation(), "dynamic": true})
		}
		return a.send(map[string]any{"type": "tool-output-available", "toolCallId": o.GetToolCallId(), "output": o.GetObservation(), "dynamic": true})
	case ev.GetCostUpdate() != nil:
		// One cost part, replaced as the totals grow.
		return a.send(uiDataChunk{Type: "data-cost", ID: "cost", Data: e.JSON})
	case ev.GetComplete() != nil:
		if a.text {
			return a.closeParts()
		}
		if err := a.delta("text", ev.GetComplete().GetContent()); err != nil {
			return err
		}
		return a.closeParts()
	case ev.GetError() != nil:
		if err := a.closeParts(); err != nil {
			return err
		}
		return a.send(map[string]any{"type": "error", "errorText": "the run failed: " + ev.GetError().GetCode() + ": " + ev.GetError().GetMessage()})
	case ev.GetCancelled() != nil:
		if err := a.closeParts(); err != nil {
			return err
		}
		return a.send(map[string]any{"type": "error", "errorText": "the run was cancelled: " + ev.GetCancelled().GetReason()})
	case ev.GetWorkPlan() != nil || ev.GetPlanStepStart() != nil || ev.GetPlanStepEnd() != nil:
		// The work plan and its steps ticking off (docs/concepts/planning.md).
		return a.send(uiDataChunk{Type: "data-plan", Data: e.JSON})
	}
	return nil
}
