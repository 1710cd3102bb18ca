package orchestrator

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	promx "github.com/baagent/baagent/internal/metrics"
)

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
