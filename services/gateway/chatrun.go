package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/gateway/internal/hub"
)

// Chat interfaces: the OpenAI-compatible Chat Completions (openai.go) and
// the AI SDK UI message stream (aisdk.go) turn a chat request into a
// normal run and its events into their own wire format. What they share
// is here: a turn either answers the question a run of the conversation
// waits on (SubmitInput) or starts a new run (StartRun), and then follows
// the run's events until it ends or asks the user something. See
// docs/concepts/chat-interfaces.md.

// chatRoutes registers the chat interfaces on the HTTP mux.
func (s *Server) chatRoutes(api func(string, http.HandlerFunc)) {
	api("GET /v1/models", s.httpOpenAIModels)
	api("POST /v1/chat/completions", s.httpOpenAIChat)
	api("POST /v1/chat", s.httpAISDKChat)
	api("GET /v1/runs/{run_id}/ui-stream", s.httpAISDKRunStream)
	api("GET /v1/chat/{chat_id}/stream", s.httpAISDKChatResume)
}

// Interfaces, the value of the run label LabelInterface.
const (
	interfaceOpenAI = "openai"
	interfaceAISDK  = "aisdk"
)

// LabelInterface is the run label naming the chat interface that started
// a run.
const LabelInterface = "interface"

// HeaderConversationID names the conversation a chat request continues,
// and is returned with the conversation the turn ran in.
const HeaderConversationID = "X-Baagent-Conversation-Id"

// chatTurn is one chat request, whatever interface it came through.
type chatTurn struct {
	iface          string // interfaceOpenAI or interfaceAISDK
	model          string // empty: the orchestrator's default
	input          string // the run input: the last user message
	systemPrompt   string
	conversationID string // empty: a new conversation
	idempotencyKey string
}

// turnStart is where a turn's events begin.
type turnStart struct {
	run *baagentv1.Run
	// after is the cursor the turn's events follow.
	after string
	// answered is set when the turn answered a waiting run's question
	// instead of starting a run.
	answered bool
}

// startTurn is a chat request's turn from its parsed prompt: the
// conversation from the header or the first of candidates set, the edge
// validation, the model check, then beginTurn.
func (s *Server) startTurn(r *http.Request, tenant, iface, model string, prompt chatPrompt, candidates ...[2]string) (turnStart, error) {
	conv, convField := conversationOf(r, candidates...)
	turn := chatTurn{
		iface:          iface,
		model:          model,
		input:          runInput(prompt, conv != ""),
		systemPrompt:   prompt.systemPrompt,
		conversationID: conv,
		idempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	if err := validateTurn(turn, convField); err != nil {
		return turnStart{}, err
	}
	if err := s.checkModel(model); err != nil {
		return turnStart{}, err
	}
	return s.beginTurn(r.Context(), tenant, turn)
}

// beginTurn answers the question a run of the conversation waits on, if
// there is one, with the turn's input; otherwise it starts a run.
func (s *Server) beginTurn(ctx context.Context, tenant string, t chatTurn) (turnStart, error) {
	if err := s.orchestratorReady(); err != nil {
		return turnStart{}, err
	}
	if t.conversationID != "" {
		st, ok, err := s.answerWaiting(ctx, tenant, t)
		if err != nil || ok {
			return st, err
		}
	}
	spec := &baagentv1.RunSpec{
		Input:          t.input,
		ConversationId: t.conversationID,
		Model:          t.model,
		SystemPrompt:   t.systemPrompt,
		IdempotencyKey: t.idempotencyKey,
		Labels:         map[string]string{LabelInterface: t.iface},
	}
	req := &baagentv1.StartRunRequest{Spec: spec}
	if err := validateStartRun(req); err != nil {
		return turnStart{}, err
	}
	resp, err := s.startRun(ctx, tenant, req)
	if err != nil {
		return turnStart{}, err
	}
	// "0" replays from the run's first event: nothing between starting
	// the run and subscribing is lost, and an idempotent retry that finds
	// an older run replays it whole.
	return turnStart{run: resp.GetRun(), after: hub.FormatCursor(0)}, nil
}

// answerWaiting submits the turn's input as the answer to the question a
// run of the conversation waits on; ok is false when none waits.
func (s *Server) answerWaiting(ctx context.Context, tenant string, t chatTurn) (turnStart, bool, error) {
	list, err := s.listRuns(ctx, tenant, &baagentv1.ListRunsRequest{
		ConversationId: t.conversationID,
		States:         []baagentv1.RunState{baagentv1.RunState_RUN_STATE_WAITING_INPUT},
		PageSize:       1,
	})
	if err != nil || len(list.GetRuns()) == 0 {
		return turnStart{}, false, err
	}
	got, err := s.getRun(ctx, tenant, &baagentv1.GetRunRequest{RunId: list.GetRuns()[0].GetRunId()})
	if err != nil {
		return turnStart{}, false, err
	}
	run := got.GetRun()
	q := pendingOf(run.GetPendingInput())
	if run.GetState() != baagentv1.RunState_RUN_STATE_WAITING_INPUT || q.InputID == "" {
		return turnStart{}, false, nil // answered or timed out meanwhile
	}
	in := &baagentv1.RunInput{InputId: q.InputID, Answer: t.input}
	for _, o := range q.Options {
		if strings.EqualFold(strings.TrimSpace(t.input), o) {
			in.SelectedOptions = []string{o}
			break
		}
	}
	req := &baagentv1.SubmitInputRequest{RunId: run.GetRunId(), Input: in}
	if err := validateSubmitInput(req); err != nil {
		return turnStart{}, false, err
	}
	// The question was published by the time the run is on record as
	// waiting, so its last_seq is at or after the question: the turn's
	// events start with the answer.
	after := hub.FormatCursor(run.GetLastSeq())
	resp, err := s.submitInput(ctx, tenant, req)
	if err != nil {
		return turnStart{}, false, err
	}
	return turnStart{run: resp.GetRun(), after: after, answered: true}, true, nil
}

// pendingQuestion is a question a run asks, as the chat interfaces show it.
type pendingQuestion struct {
	Kind     string   `json:"kind"` // clarification, decision or permission
	InputID  string   `json:"input_id"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
}

func newPending(kind, id, question string, options []string) pendingQuestion {
	return pendingQuestion{Kind: kind, InputID: id, Question: question, Options: options}
}

// pendingOf is the question of a waiting run's pending input.
func pendingOf(p *baagentv1.PendingInput) pendingQuestion {
	if c := p.GetClarification(); c != nil {
		return clarificationQuestion(c)
	}
	if d := p.GetDecision(); d != nil {
		return decisionQuestion("decision", d)
	}
	return pendingQuestion{}
}

func clarificationQuestion(c *baagentv1.ClarificationQuestion) pendingQuestion {
	var opts []string
	for _, o := range c.GetOptions() {
		opts = append(opts, o.GetLabel())
	}
	return newPending("clarification", c.GetQuestionId(), c.GetQuestion(), opts)
}

func decisionQuestion(kind string, d *baagentv1.DecisionPoint) pendingQuestion {
	var opts []string
	for _, o := range d.GetOptions() {
		opts = append(opts, o.GetLabel())
	}
	return newPending(kind, d.GetDecisionId(), d.GetContext(), opts)
}

// questionOf is the question an event asks the user, if it asks one.
func questionOf(ev *baagentv1.Event) (pendingQuestion, bool) {
	switch {
	case ev.GetClarificationAsked() != nil:
		return clarificationQuestion(ev.GetClarificationAsked()), true
	case ev.GetDecisionAsked() != nil:
		return decisionQuestion("decision", ev.GetDecisionAsked()), true
	case ev.GetPermissionAsked() != nil:
		p := ev.GetPermissionAsked()
		q := decisionQuestion("permission", p.GetDecision())
		if q.Question == "" {
			q.Question = "Allow the tool " + p.GetToolName() + " to run with " + p.GetArguments() + "?"
		}
		return q, true
	}
	return pendingQuestion{}, false
}

// text is the question as the assistant's message.
func (q pendingQuestion) text() string {
	if len(q.Options) == 0 {
		return q.Question
	}
	return q.Question + "\n\nOptions: " + strings.Join(q.Options, " · ")
}

// turnSink receives a turn's events in order, once each.
type turnSink interface {
	// event gets the next event; ask is set when the event asks the user
	// a question the run still waits on (the turn ends after it).
	event(e *hub.Entry, ask *pendingQuestion) error
	// heartbeat is called when no event came for a while (streaming
	// responses send a keep-alive).
	heartbeat() error
}

// turnEnd is how a turn's events ended.
type turnEnd struct {
	last     *hub.Entry       // the last event (nil: none)
	question *pendingQuestion // set when the run asks the user
	cursor   string           // resume after this
}

// followTurn subscribes to the run's events after cursor and gives each to
// sink until the run ends (its terminal event) or asks the user a question.
func (s *Server) followTurn(ctx context.Context, tenant, runID, cursor string, sink turnSink) (turnEnd, error) {
	if !s.streams.add() {
		return turnEnd{}, errUnavailable(hub.ErrClosed)
	}
	defer s.streams.done()
	sub, err := s.openStream(ctx, tenant, runID, cursor, hub.TransportSSE)
	if err != nil {
		return turnEnd{}, err
	}
	defer sub.Close()
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	end := turnEnd{cursor: cursor}
	for {
		it, ticked, err := sub.NextOrTick(ctx, heartbeat.C)
		switch {
		case ticked:
			if err := sink.heartbeat(); err != nil {
				return end, err
			}
			continue
		case errors.Is(err, io.EOF):
			return end, nil
		case hub.IsSlowConsumer(err):
			return end, slowConsumerStatus(end.cursor)
		case errors.Is(err, hub.ErrClosed):
			return end, status.Error(codes.Unavailable, "the gateway is shutting down; resume from the last cursor received")
		case err != nil:
			if ctx.Err() != nil {
				return end, status.FromContextError(ctx.Err()).Err()
			}
			return end, status.Errorf(codes.Unavailable, "event stream failed: %v; resume from the last cursor received", err)
		}
		var ask *pendingQuestion
		if q, ok := questionOf(it.Event); ok && s.waitsOn(ctx, tenant, runID, q.InputID) {
			ask = &q
		}
		if err := sink.event(it.Entry, ask); err != nil {
			return end, err
		}
		sub.Delivered(it)
		end.last = it.Entry
		if it.Cursor != "" {
			end.cursor = it.Cursor
		}
		if it.Terminal {
			return end, nil
		}
		if ask != nil {
			end.question = ask
			return end, nil
		}
	}
}

// waitsOn reports whether the run still waits on the question inputID. A
// question is published only once the run is on record as waiting on it,
// so a question that a replay finds already answered (or timed out) is
// not where the turn ends: its answer follows. When the run cannot be
// read, the turn ends at the question, as if it waited.
func (s *Server) waitsOn(ctx context.Context, tenant, runID, inputID string) bool {
	resp, err := s.getRun(ctx, tenant, &baagentv1.GetRunRequest{RunId: runID})
	if err != nil {
		return true
	}
	run := resp.GetRun()
	return run.GetState() == baagentv1.RunState_RUN_STATE_WAITING_INPUT && pendingOf(run.GetPendingInput()).InputID == inputID
}

// conversationOf picks the conversation a request continues: the header
// wins over the body's fields, checked in order; field names the one used.
func conversationOf(r *http.Request, candidates ...[2]string) (id, field string) {
	if h := strings.TrimSpace(r.Header.Get(HeaderConversationID)); h != "" {
		return h, HeaderConversationID
	}
	for _, c := range candidates {
		if c[1] != "" {
			return c[1], c[0]
		}
	}
	return "", ""
}

// validateTurn checks what the chat request fields become in the run.
func validateTurn(t chatTurn, convField string) error {
	var e validate.Errors
	if convField != "" {
		validate.ID(&e, convField, t.conversationID)
	}
	if t.model != "" {
		validate.Model(&e, "model", t.model)
	}
	validate.Optional(&e, "Idempotency-Key", t.idempotencyKey, validate.IdempotencyKey)
	validate.Text(&e, "messages", t.systemPrompt, validate.MaxSystemPromptBytes)
	return e.Err()
}
