package orchestrator

import (
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// maxPermissionArgs bounds the arguments a permission_asked event quotes.
const maxPermissionArgs = 4 << 10

// waitingCall is the step's tool call a wait is about (nil if none).
func (r *run) waitingCall(w *hitl.Wait) *baagentv1.ToolCall {
	if r.cur == nil || w.CallIndex < 0 || w.CallIndex >= len(r.cur.msg.GetToolCalls()) {
		return nil
	}
	return r.cur.msg.GetToolCalls()[w.CallIndex]
}

// pause makes the run wait on w, asked about the step's call i.
func (r *run) pause(i int, w *hitl.Wait) error {
	w.CallIndex = i
	w.WorkSeq = r.workSeq
	p := w.Pending()
	ev := &baagentv1.Event{}
	switch c := r.waitingCall(w); {
	case p.GetClarification() != nil:
		ev.Payload = &baagentv1.Event_ClarificationAsked{ClarificationAsked: p.GetClarification()}
	case w.Kind == hitl.KindPermission:
		args := c.GetArguments()
		if len(args) > maxPermissionArgs {
			args = strings.ToValidUTF8(args[:maxPermissionArgs], "") + "…"
		}
		ev.Payload = &baagentv1.Event_PermissionAsked{PermissionAsked: &baagentv1.PermissionAskedPayload{
			ToolCallId: c.GetId(), ToolName: c.GetName(), Arguments: args, Decision: p.GetDecision(),
		}}
	default:
		ev.Payload = &baagentv1.Event_DecisionAsked{DecisionAsked: p.GetDecision()}
	}
	// The question is published only once the run is on record as
	// waiting (checkpoint and record), so a client that answers the moment
	// it sees the question finds the run ready for the answer. Held until
	// then, it rides in the checkpoint's outbox: a replica that dies here
	// is replaced by one that publishes it.
	if err := r.hold(ev); err != nil {
		return err
	}
	r.wait, r.paused = w, true
	r.rec.State = baagentv1.RunState_RUN_STATE_WAITING_INPUT
	r.rec.PendingInput = p
	if err := r.checkpoint(checkpoint.KindWaitingInput); err != nil {
		return err
	}
	r.save(r.ctx)
	// Stored before the run lets go of its work item, and named by the
	// record's last_seq.
	if err := r.flush(); err != nil {
		return err
	}
	r.save(r.ctx)
	r.s.metrics.waits.WithLabelValues(w.Kind).Inc()
	r.log.Info("run waits for input", "kind", w.Kind, "input_id", w.ID, "deadline", w.Deadline)
	return nil
}

// due returns the wait for the step's call i of kind, when it can be
// settled now (answered or past its deadline); nil when the question must
// (still) be asked.
func (r *run) due(i int, kinds ...string) *hitl.Wait {
	w := r.wait
	if w == nil || w.CallIndex != i {
		return nil
	}
	for _, k := range kinds {
		if w.Kind == k {
			r.wait = nil
			return w
		}
	}
	return nil
}

// answered publishes the answered event of w.
func (r *run) answered(w *hitl.Wait, answer string, timedOut bool) error {
	ev := &baagentv1.Event{}
	switch {
	case w.Kind == hitl.KindClarification:
		ev.Payload = &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: &baagentv1.ClarificationAnsweredPayload{QuestionId: w.ID, Answer: answer, TimedOut: timedOut}}
	case w.Kind == hitl.KindPermission:
		c := r.waitingCall(w)
		ev.Payload = &baagentv1.Event_PermissionReplied{PermissionReplied: &baagentv1.PermissionRepliedPayload{
			ToolCallId: c.GetId(), ToolName: c.GetName(), DecisionId: w.ID, Reply: answer, TimedOut: timedOut,
		}}
	default:
		var sel []string
		if w.Answer != nil {
			sel = w.Answer.Selected
		}
		ev.Payload = &baagentv1.Event_DecisionAnswered{DecisionAnswered: &baagentv1.DecisionAnsweredPayload{DecisionId: w.ID, Answer: answer, SelectedOptions: sel, TimedOut: timedOut}}
	}
	return r.emit(ev)
}
