package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// stepState is the step in progress: the model's response and one record
// per tool call. It is what LLM_COMPLETE / TOOL_COMPLETE checkpoints hold.
type stepState struct {
	msg     *baagentv1.ChatMessage
	modelMs float64
	usage   float64 // context usage of the step's window
	// durable is the LLM_COMPLETE checkpoint being written; nil once it
	// is known stored (a step resumed from it). Everything that depends
	// on the model's response waits for it; read-only tool calls, which
	// nothing would miss if the response were lost, do not.
	durable *pendingWrite
	mu      sync.Mutex
	records []checkpoint.ToolRecord
}

// loop is the ReAct loop of one run, from its checkpoint. It returns the
// final answer, or the error that ended the run (a *runError, or the run's
// cancellation cause); with r.paused set it returns ("", nil): the run
// waits for input.
func (r *run) loop() (string, error) {
	ctx := r.ctx
	cp := r.resume
	if w := cp.Wait; w != nil && !w.Due(time.Now()) {
		// Delivered again before its question was answered or due.
		r.wait, r.paused = w, true
		return "", nil
	}
	r.rec.State = baagentv1.RunState_RUN_STATE_RUNNING
	r.rec.PendingInput = nil
	if !cp.Started {
		r.rec.StartedAt = timestamppb.Now()
		warning := r.classify(ctx)
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{
			Input:             r.rec.GetInput(),
			Model:             r.rec.GetModel(),
			ScriptedModel:     r.rec.GetScriptedModel(),
			MaxSteps:          r.rec.GetMaxSteps(),
			Project:           r.rec.GetProject(),
			Replica:           r.s.opts.Replica,
			QueryComplexity:   r.rec.GetQueryComplexity(),
			ComplexitySignals: r.rec.GetComplexitySignals(),
			PlanMode:          r.planMode(),
		}}}); err != nil {
			return "", err
		}
		if warning != "" {
			if err := r.warn(warnComplexityFailed, warning); err != nil {
				return "", err
			}
		}
		if err := r.appendMessages(ctx, &baagentv1.ChatMessage{
			Id:      r.rec.GetRunId() + ":user",
			Role:    baagentv1.Role_ROLE_USER,
			Content: r.rec.GetInput(),
		}); err != nil {
			return "", err
		}
		if err := r.beginRound(ctx); err != nil {
			return "", err
		}
		r.roundReady = true
		// Before planning and the first model step. A reuse decision
		// pauses the run here: the WAITING_INPUT checkpoint the pause
		// writes stands for the start's (patterns.go).
		if err := r.matchPattern(ctx); err != nil || r.paused {
			return "", err
		}
		if err := r.checkpoint(checkpoint.KindStart); err != nil {
			return "", err
		}
	}
	r.save(ctx)
	if err := r.settlePattern(cp.Wait); err != nil {
		return "", err
	}

	catalog, err := r.catalog(ctx)
	if err != nil {
		return "", err
	}
	system := systemMessages(r.s.opts.SystemPrompt, r.spec.GetSystemPrompt(), catalog.GetText())
	system = append(system, r.patternMessage()...)
	if len(cp.Assistant) > 0 {
		msg, err := protoenc.Unmarshal[baagentv1.ChatMessage](cp.Assistant)
		if err != nil {
			return "", newRunError(CodeInternal, err, "the run's checkpoint cannot be read: %v", err)
		}
		r.cur = &stepState{msg: msg, modelMs: cp.ModelMs, records: cp.Tools}
		r.wait = cp.Wait
	}

	var tools *toolset
	var toolsFor uint64 // stack generation the toolset was listed for
	listed := false
	for {
		if r.cur == nil {
			if r.rec.GetStep() >= r.rec.GetMaxSteps() {
				return "", newRunError(CodeMaxSteps, nil,
					"the run reached its limit of %d steps without a final answer; raise max_steps or narrow the request", r.rec.GetMaxSteps())
			}
			if err := r.checkBudget(ctx); err != nil {
				return "", err
			}
			r.rec.Step++
		}
		if !listed || toolsFor != r.skills.Generation() {
			if tools, err = r.listTools(ctx, catalog.GetSkillCount() > 0 || r.skills.Depth() > 0); err != nil {
				return "", err
			}
			toolsFor, listed = r.skills.Generation(), true
		}
		offered, err := r.planBefore(ctx, tools)
		if err != nil {
			return "", err
		}
		sctx, span := r.s.span(ctx, "step", trace.SpanKindInternal)
		step, resumed := r.rec.GetStep(), r.cur != nil
		answer, final, err := r.step(sctx, system, offered)
		if err == nil && !r.paused {
			answer, final, err = r.planAfter(ctx, answer, final)
		}
		if span.IsRecording() {
			// One call when the step ends: a single attribute slice.
			span.SetAttributes(attribute.Int("baagent.step", int(step)), attribute.Bool("baagent.step.resumed", resumed),
				attribute.Bool("baagent.step.final", final), attribute.Bool("baagent.step.paused", r.paused))
		}
		endSpan(span, err)
		switch {
		case err != nil:
			return "", err
		case r.paused:
			return "", nil
		case final:
			return answer, nil
		}
	}
}

// step runs one ReAct step (window, model, tools), or the rest of a step
// resumed from its checkpoint. It returns the answer and final=true when
// the model answered without tool calls.
func (r *run) step(ctx context.Context, system []*baagentv1.ChatMessage, tools *toolset) (string, bool, error) {
	step := r.rec.GetStep()
	began := time.Now()
	start := &baagentv1.StepStartPayload{StepNumber: step}
	if r.cur != nil {
		start.Description = fmt.Sprintf("step %d resumed on replica %s", step, r.s.opts.Replica)
		if r.wait != nil {
			start.Description += " after the user's input"
		}
	}
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: start}}); err != nil {
		return "", false, err
	}
	if r.cur == nil {
		if err := r.think(ctx, step, system, tools); err != nil {
			return "", false, err
		}
	}
	st := r.cur
	modelTime := time.Duration(st.modelMs * float64(time.Millisecond))
	if len(st.msg.GetToolCalls()) == 0 {
		if err := st.durable.wait(); err != nil {
			return "", false, err
		}
		if err := r.appendMessages(ctx, st.msg); err != nil {
			return "", false, err
		}
		return st.msg.GetContent(), true, r.endStep(began, modelTime, 0, true)
	}
	results, toolTime, err := r.runTools(ctx, st, tools)
	if err != nil || r.paused {
		return "", false, err
	}
	// One append: the assistant's tool calls and their results enter the
	// history together, never one without the other.
	if err := r.appendMessages(ctx, append([]*baagentv1.ChatMessage{st.msg}, results...)...); err != nil {
		return "", false, err
	}
	return "", false, r.endStep(began, modelTime, toolTime, true)
}

// endStep publishes step_end and observes the step's platform overhead.
// It writes no checkpoint: the step's last one (its last TOOL_COMPLETE, or
// LLM_COMPLETE for an answer) holds every result, so a run resumed from it
// only repeats the idempotent append and step_end. Nor is the record
// saved: a running run's step and metrics are read from its checkpoint
// (GetRun), and the record is written when the state changes.
func (r *run) endStep(began time.Time, modelTime, toolTime time.Duration, ok bool) error {
	took := time.Since(began)
	r.s.metrics.steps.Inc()
	r.s.metrics.stepOverhead.Observe(max(0, took-modelTime-toolTime).Seconds())
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{
		StepNumber: r.rec.GetStep(), Success: ok, DurationMs: float64(took.Microseconds()) / 1000,
	}}}); err != nil {
		return err
	}
	r.cur, r.wait = nil, nil
	r.rec.Metrics = r.metrics.Snapshot(time.Now(), false)
	return nil
}
