package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/baagent/baagent/core/pricing"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
)

// think builds the window, calls the model and checkpoints its response
// (LLM_COMPLETE, in the background: see stepState.durable).
func (r *run) think(ctx context.Context, step int32, system []*baagentv1.ChatMessage, tools *toolset) error {
	model := r.skills.Model(r.rec.GetModel())
	info := r.modelInfo(ctx, model)
	wctx, wspan := r.s.span(ctx, "build_window", trace.SpanKindInternal)
	win, err := r.buildWindow(wctx, &baagentv1.BuildWindowRequest{
		Tenant:         r.rec.GetTenant(),
		ConversationId: r.rec.GetConversationId(),
		Model:          model,
		SystemMessages: system,
		Budget: &baagentv1.BudgetOptions{
			MaxContextTokens: info.GetMetadata().GetContextLength(),
			MaxOutputTokens:  info.GetMetadata().GetMaxOutputTokens(),
		},
		RunId: r.rec.GetRunId(),
	}, tools)
	windowSpan(wspan, model, win, err)
	if err != nil {
		return peerError(ctx, "context", "BuildWindow", err)
	}
	compressed := win.GetCompression().GetWasCompressed() || win.GetCompression().GetPrunedToolOutputCount() > 0
	r.metrics.RecordWindow(len(win.GetMessages()), compressed)
	if compressed {
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_ContextCompressed{ContextCompressed: win.GetCompression()}}); err != nil {
			return err
		}
	}
	msgs := make([]*baagentv1.ChatMessage, len(win.GetMessages()))
	for i, m := range win.GetMessages() {
		msgs[i] = m.GetMessage()
	}
	reservation, err := r.reserveModelCall(ctx, step, info, win)
	if err != nil {
		return err
	}
	resp, modelTime, err := r.callModel(ctx, model, msgs, tools.schemas)
	if err != nil {
		r.settleModelCall(reservation, nil, 0, true)
		return err
	}
	err = r.account(model, info, resp.Usage)
	r.settleModelCall(reservation, resp.Usage, r.budget.stepCost, r.budget.stepPriced)
	if err != nil {
		return err
	}
	msg := resp.Message
	msg.Id = fmt.Sprintf("%s:s%d:assistant", r.rec.GetRunId(), step)
	msg.Role = baagentv1.Role_ROLE_ASSISTANT
	st := &stepState{msg: msg, modelMs: float64(modelTime.Microseconds()) / 1000, usage: win.GetContextUsage()}
	if len(msg.GetToolCalls()) == 0 {
		if strings.TrimSpace(msg.GetContent()) == "" {
			return newRunError(CodeModelProtocol, nil,
				"the model %s returned neither an answer nor a tool call (finish reason %q)", model, resp.FinishReason)
		}
		r.cur = st
		st.durable = r.checkpointAsync(checkpoint.KindLLMComplete)
		return nil
	}
	if err := checkToolCalls(msg.GetToolCalls()); err != nil {
		return newRunError(CodeModelProtocol, err, "the model %s returned malformed tool calls: %v", model, err)
	}
	for _, t := range []string{msg.GetReasoningContent(), msg.GetContent()} {
		if strings.TrimSpace(t) == "" {
			continue
		}
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: t, ThoughtLevel: r.thoughtLevel(msg)}}}); err != nil {
			return err
		}
	}
	now := time.Now()
	for i, c := range msg.GetToolCalls() {
		act := &baagentv1.ActPayload{ToolCallId: c.GetId(), ToolName: c.GetName()}
		if args, err := parseArgs(c.GetArguments()); err == nil {
			act.ToolInput = args
		} else {
			act.RawArguments = c.GetArguments()
		}
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_Act{Act: act}}); err != nil {
			return err
		}
		st.records = append(st.records, checkpoint.ToolRecord{
			CallID: c.GetId(), ToolName: c.GetName(), Status: checkpoint.ToolRunning, StepNumber: step, SequenceNumber: i,
			IdempotencyKey: fmt.Sprintf("%s:s%d:c%d", r.rec.GetRunId(), step, i), StartedAt: now,
			Doom: r.doom.Observe(c.GetName(), c.GetArguments(), now),
		})
	}
	r.cur = st
	st.durable = r.checkpointAsync(checkpoint.KindLLMComplete)
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
	promx.Observe(ctx, r.s.metrics.modelLatency, took.Seconds())
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
// cost_update. The cost is [pricing.Cost] of the model's metadata; when the
// price is unknown, or the endpoint reported no usage (u nil), the call is
// counted as unpriced, never as free.
func (r *run) account(model string, info *baagentv1.ModelInfo, u *baagentv1.Usage) error {
	reported := u != nil
	if !reported {
		u = &baagentv1.Usage{}
	}
	meta := info.GetMetadata()
	cost, known := pricing.Cost(meta, u)
	if !reported {
		cost, known = 0, false
	}
	tokens := pricing.Split(u)
	r.metrics.RecordModelCall(model, u, cost, known)
	r.budget.stepCost, r.budget.stepPriced = cost, known
	r.s.metrics.modelTokens.WithLabelValues("input").Add(float64(u.GetPromptTokens()))
	r.s.metrics.modelTokens.WithLabelValues("output").Add(float64(u.GetCompletionTokens()))
	r.s.metrics.cost.record(r.rec.GetTenant(), meta, tokens, cost, known)
	asOf := ""
	if known {
		asOf = meta.GetPriceAsOf()
	}
	m := r.metrics.Snapshot(time.Now(), false)
	return r.emit(&baagentv1.Event{Payload: &baagentv1.Event_CostUpdate{CostUpdate: &baagentv1.CostUpdatePayload{
		Model:             model,
		Usage:             u,
		TotalInputTokens:  m.GetTotalInputTokens(),
		TotalOutputTokens: m.GetTotalOutputTokens(),
		StepCostUsd:       cost,
		TotalCostUsd:      m.GetTotalCostUsd(),
		PriceKnown:        known,
		PriceAsOf:         asOf,
		CachedInputTokens: tokens.CachedInput,
	}}})
}

// modelInfo returns the tokens service's metadata of model (context length,
// output limit, prices), asked once per model per run. Without it the run
// still works: the context service sizes the window from its own model
// metadata and the cost is reported as unknown (price_known false).
func (r *run) modelInfo(ctx context.Context, model string) *baagentv1.ModelInfo {
	if info, ok := r.models[model]; ok {
		return info
	}
	resp, err := r.s.opts.Tokens.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: model})
	switch {
	case err != nil:
		r.log.Warn("model info unavailable; cost reported as unknown", "model", model, "error", err)
	case !pricing.Priced(resp.GetInfo().GetMetadata()):
		r.log.Info("model has no price; its calls are reported as unpriced", "model", model)
	}
	r.models[model] = resp.GetInfo()
	return resp.GetInfo()
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
