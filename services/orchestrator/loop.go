package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// loop is the ReAct loop of one run. It returns the final answer, or the
// error that ended the run (a *runError, or the run's cancellation cause).
func (r *run) loop() (string, error) {
	ctx := r.ctx
	r.rec.State = baagentv1.RunState_RUN_STATE_RUNNING
	r.rec.StartedAt = timestamppb.Now()
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{
		Input:         r.rec.GetInput(),
		Model:         r.rec.GetModel(),
		ScriptedModel: r.rec.GetScriptedModel(),
		MaxSteps:      r.rec.GetMaxSteps(),
		Project:       r.rec.GetProject(),
		Replica:       r.s.opts.Replica,
	}}}); err != nil {
		return "", err
	}
	if err := r.flush(); err != nil {
		return "", err
	}
	r.save(ctx)

	if err := r.appendMessages(ctx, &baagentv1.ChatMessage{
		Id:      r.rec.GetRunId() + ":user",
		Role:    baagentv1.Role_ROLE_USER,
		Content: r.rec.GetInput(),
	}); err != nil {
		return "", err
	}
	catalog, err := r.catalog(ctx)
	if err != nil {
		return "", err
	}
	system := systemMessages(r.s.opts.SystemPrompt, r.spec.GetSystemPrompt(), catalog.GetText())

	var tools *toolset
	toolsFor := -1 // stack depth the toolset was listed for
	for {
		if r.rec.GetStep() >= r.rec.GetMaxSteps() {
			return "", newRunError(CodeMaxSteps, nil,
				"the run reached its limit of %d steps without a final answer; raise max_steps or narrow the request", r.rec.GetMaxSteps())
		}
		r.rec.Step++
		if toolsFor != len(r.skills.frames) {
			if tools, err = r.listTools(ctx, catalog.GetSkillCount() > 0); err != nil {
				return "", err
			}
			toolsFor = len(r.skills.frames)
		}
		answer, final, err := r.step(ctx, system, tools)
		if err != nil {
			return "", err
		}
		if final {
			return answer, nil
		}
	}
}

// step runs one ReAct step: window, model, tools. It returns the answer
// and final=true when the model answered without tool calls.
func (r *run) step(ctx context.Context, system []*baagentv1.ChatMessage, tools *toolset) (string, bool, error) {
	step := r.rec.GetStep()
	began := time.Now()
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: step}}}); err != nil {
		return "", false, err
	}
	model := r.skills.model(r.rec.GetModel())
	info := r.modelInfo(ctx, model)

	win, err := r.s.opts.Context.BuildWindow(ctx, &baagentv1.BuildWindowRequest{
		Tenant:         r.rec.GetTenant(),
		ConversationId: r.rec.GetConversationId(),
		Model:          model,
		SystemMessages: system,
		Tools:          tools.schemas,
		Budget: &baagentv1.BudgetOptions{
			MaxContextTokens: info.GetMetadata().GetContextLength(),
			MaxOutputTokens:  info.GetMetadata().GetMaxOutputTokens(),
		},
		RunId: r.rec.GetRunId(),
	})
	if err != nil {
		return "", false, peerError(ctx, "context", "BuildWindow", err)
	}
	compressed := win.GetCompression().GetWasCompressed() || win.GetCompression().GetPrunedToolOutputCount() > 0
	r.metrics.recordWindow(len(win.GetMessages()), compressed)
	if compressed {
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_ContextCompressed{ContextCompressed: win.GetCompression()}}); err != nil {
			return "", false, err
		}
	}
	msgs := make([]*baagentv1.ChatMessage, len(win.GetMessages()))
	for i, m := range win.GetMessages() {
		msgs[i] = m.GetMessage()
	}

	resp, modelTime, err := r.callModel(ctx, model, msgs, tools.schemas)
	if err != nil {
		return "", false, err
	}
	if err := r.account(model, info, resp.Usage); err != nil {
		return "", false, err
	}

	msg := resp.Message
	msg.Id = fmt.Sprintf("%s:s%d:assistant", r.rec.GetRunId(), step)
	msg.Role = baagentv1.Role_ROLE_ASSISTANT
	if len(msg.GetToolCalls()) == 0 {
		if strings.TrimSpace(msg.GetContent()) == "" {
			return "", false, newRunError(CodeModelProtocol, nil,
				"the model %s returned neither an answer nor a tool call (finish reason %q)", model, resp.FinishReason)
		}
		if err := r.appendMessages(ctx, msg); err != nil {
			return "", false, err
		}
		return msg.GetContent(), true, r.endStep(began, modelTime, 0, true)
	}
	if err := checkToolCalls(msg.GetToolCalls()); err != nil {
		return "", false, newRunError(CodeModelProtocol, err, "the model %s returned malformed tool calls: %v", model, err)
	}
	for _, t := range []string{msg.GetReasoningContent(), msg.GetContent()} {
		if strings.TrimSpace(t) == "" {
			continue
		}
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: t, ThoughtLevel: "task"}}}); err != nil {
			return "", false, err
		}
	}
	results, toolTime, err := r.runTools(ctx, msg.GetToolCalls(), tools, win.GetContextUsage())
	if err != nil {
		return "", false, err
	}
	// One append: the assistant's tool calls and their results enter the
	// history together, never one without the other.
	if err := r.appendMessages(ctx, append([]*baagentv1.ChatMessage{msg}, results...)...); err != nil {
		return "", false, err
	}
	return "", false, r.endStep(began, modelTime, toolTime, true)
}

// endStep publishes step_end, observes the step's platform overhead and
// saves the record.
func (r *run) endStep(began time.Time, modelTime, toolTime time.Duration, ok bool) error {
	took := time.Since(began)
	r.s.metrics.steps.Inc()
	r.s.metrics.stepOverhead.Observe(max(0, took-modelTime-toolTime).Seconds())
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{
		StepNumber: r.rec.GetStep(), Success: ok, DurationMs: float64(took.Microseconds()) / 1000,
	}}}); err != nil {
		return err
	}
	if err := r.flush(); err != nil {
		return err
	}
	r.rec.Metrics = r.metrics.snapshot(time.Now(), false)
	r.save(r.ctx)
	return nil
}

// callModel streams one completion, publishing text and thought fragments
// as they arrive.
func (r *run) callModel(ctx context.Context, model string, msgs []*baagentv1.ChatMessage, tools []*baagentv1.ToolSchema) (*ModelResponse, time.Duration, error) {
	var emitErr error
	onDelta := func(d ModelDelta) {
		if emitErr != nil {
			return
		}
		switch {
		case d.Thought != "":
			emitErr = r.emit(&baagentv1.Event{Payload: &baagentv1.Event_ThoughtDelta{ThoughtDelta: &baagentv1.ThoughtDeltaPayload{Delta: d.Thought}}})
		case d.Text != "":
			emitErr = r.emit(&baagentv1.Event{Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: d.Text}}})
		}
	}
	began := time.Now()
	resp, err := r.s.opts.Model.Stream(ctx, ModelRequest{Model: model, Messages: msgs, Tools: tools}, onDelta)
	took := time.Since(began)
	r.s.metrics.modelLatency.Observe(took.Seconds())
	switch {
	case ctx.Err() != nil:
		return nil, took, context.Cause(ctx)
	case emitErr != nil:
		return nil, took, emitErr
	case err != nil:
		return nil, took, newRunError(CodeModelUnavailable, err, "the model %s failed: %v", model, err)
	case resp == nil || resp.Message == nil:
		return nil, took, newRunError(CodeModelProtocol, nil, "the model %s returned no message", model)
	}
	return resp, took, nil
}

// account adds a model call's usage and cost to the run and publishes
// cost_update.
func (r *run) account(model string, info *baagentv1.ModelInfo, u *baagentv1.Usage) error {
	if u == nil {
		u = &baagentv1.Usage{}
	}
	meta := info.GetMetadata()
	cost := float64(u.GetPromptTokens())*meta.GetInputCostPer_1M()/1e6 + float64(u.GetCompletionTokens())*meta.GetOutputCostPer_1M()/1e6
	r.metrics.recordModelCall(u, cost)
	r.s.metrics.modelTokens.WithLabelValues("input").Add(float64(u.GetPromptTokens()))
	r.s.metrics.modelTokens.WithLabelValues("output").Add(float64(u.GetCompletionTokens()))
	m := r.metrics.snapshot(time.Now(), false)
	return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{
		Model:             model,
		Usage:             u,
		TotalInputTokens:  m.GetTotalInputTokens(),
		TotalOutputTokens: m.GetTotalOutputTokens(),
		StepCostUsd:       cost,
		TotalCostUsd:      m.GetTotalCostUsd(),
	}}})
}

// modelInfo returns the tokens service's metadata of model (context length,
// output limit, prices), asked once per model per run. Without it the run
// still works: the context service sizes the window from its own model
// metadata and the cost is reported as 0 (unknown).
func (r *run) modelInfo(ctx context.Context, model string) *baagentv1.ModelInfo {
	if info, ok := r.models[model]; ok {
		return info
	}
	resp, err := r.s.opts.Tokens.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: model})
	if err != nil {
		r.log.Warn("model info unavailable; cost reported as unknown (0)", "model", model, "error", err)
	}
	r.models[model] = resp.GetInfo()
	return resp.GetInfo()
}

// catalog renders the level-1 skills catalog within its token budget.
func (r *run) catalog(ctx context.Context) (*baagentv1.GetCatalogResponse, error) {
	resp, err := r.s.opts.Skills.GetCatalog(ctx, &baagentv1.GetCatalogRequest{
		Tenant:      r.rec.GetTenant(),
		Project:     r.rec.GetProject(),
		Model:       r.rec.GetModel(),
		TokenBudget: r.s.opts.CatalogTokenBudget,
	})
	if err != nil {
		return nil, peerError(ctx, "skills", "GetCatalog", err)
	}
	return resp, nil
}

// appendMessages stores messages in the conversation, tagged with the run
// as their round. Message ids derive from the run, step and position, so a
// repeated append is a no-op.
func (r *run) appendMessages(ctx context.Context, msgs ...*baagentv1.ChatMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	now := timestamppb.Now()
	for _, m := range msgs {
		m.RoundId = r.rec.GetRunId()
		if m.CreatedAt == nil {
			m.CreatedAt = now
		}
	}
	_, err := r.s.opts.Context.Append(ctx, &baagentv1.AppendRequest{
		Tenant:         r.rec.GetTenant(),
		ConversationId: r.rec.GetConversationId(),
		Messages:       msgs,
	})
	if err != nil {
		return peerError(ctx, "context", "Append", err)
	}
	return nil
}

// checkToolCalls refuses tool calls the platform cannot answer: a result
// must carry the model's own id, so a call without an id, or two calls with
// the same id, cannot be paired with their results.
func checkToolCalls(calls []*baagentv1.ToolCall) error {
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		switch {
		case c.GetId() == "":
			return fmt.Errorf("tool call %d (%s) has no id", i, c.GetName())
		case seen[c.GetId()]:
			return fmt.Errorf("tool call id %q is used twice", c.GetId())
		}
		seen[c.GetId()] = true
	}
	return nil
}
