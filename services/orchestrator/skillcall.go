package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/skillstack"
)

// activateSkill answers a call of the skill meta-tool: ActivateSkill on the
// skills service with the run's activation chain, then the skill's messages
// are injected after the step's tool results and its context modifier
// applies (allowed tools, model) from the next step on. A refused
// activation (cycle, depth, unknown or disabled skill, bad arguments) is an
// error observation the model can act on.
func (r *run) activateSkill(ctx context.Context, i int, c *baagentv1.ToolCall) (*callResult, error) {
	ctx, span := r.s.span(ctx, "activate_skill", trace.SpanKindInternal)
	res, err := r.activateSkillTraced(ctx, i, c)
	if span.IsRecording() {
		name, _ := parseSkillArgs(c.GetArguments())
		span.SetAttributes(attribute.String("baagent.skill.name", name), attribute.String("gen_ai.tool.call.id", c.GetId()),
			attribute.Int("baagent.skill.depth", r.skills.Depth()))
		if res != nil && res.observe != nil && !res.observe.GetSuccess() {
			span.SetAttributes(attribute.String("error.type", res.observe.GetErrorCode()))
			span.SetStatus(otelcodes.Error, res.observe.GetErrorCode())
		}
	}
	endSpan(span, err)
	return res, err
}

func (r *run) activateSkillTraced(ctx context.Context, i int, c *baagentv1.ToolCall) (*callResult, error) {
	began := time.Now()
	name, err := parseSkillArgs(c.GetArguments())
	if err != nil {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, err.Error()), nil
	}
	if why := r.skillRefused(name); why != "" {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeSkillNotAllowed, why), nil
	}
	chain := r.skills.Chain()
	activationID := fmt.Sprintf("%s:s%d:%d", r.rec.GetRunId(), r.rec.GetStep(), i)
	resp, err := r.s.opts.Skills.ActivateSkill(ctx, &baagentv1.ActivateSkillRequest{Activation: &baagentv1.SkillActivationRequest{
		SkillName:       name,
		ActivationId:    activationID,
		ConversationId:  r.rec.GetConversationId(),
		UserRequest:     r.rec.GetInput(),
		LoadLevel:       baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS,
		ActivationDepth: int32(len(chain)),
		ActivationChain: chain,
		Tenant:          r.rec.GetTenant(),
		Project:         r.rec.GetProject(),
	}})
	if err != nil && ctx.Err() == nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.FailedPrecondition:
			return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeSkillRefused, st.Message()), nil
		case codes.NotFound:
			return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, codeSkillNotFound,
				fmt.Sprintf("There is no skill named %q. Use a name from the skills catalog.", name)), nil
		case codes.InvalidArgument:
			return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, st.Message()), nil
		}
	}
	if err != nil {
		return nil, peerError(ctx, "skills", "ActivateSkill", err)
	}
	res := resp.GetResult()
	if !res.GetSuccess() {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeSkillRefused, res.GetError()), nil
	}

	// The stack is part of every checkpoint, and the step's other calls,
	// finishing in parallel, take checkpoints: change it under cpMu.
	r.cpMu.Lock()
	r.skills.Push(skillstack.Activation{Name: res.GetSkillName(), ID: activationID, Modifier: res.GetContextModifier()})
	r.cpMu.Unlock()
	newChain := res.GetActivationChain()
	if len(newChain) == 0 {
		newChain = r.skills.Chain()
	}
	r.metrics.RecordSkill(res.GetSkillName())
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_SkillActivated{SkillActivated: &baagentv1.SkillActivatedPayload{
		SkillName:       res.GetSkillName(),
		ActivationId:    activationID,
		ActivationChain: newChain,
		ContextModifier: res.GetContextModifier(),
		Scope:           res.GetScope(),
	}}}); err != nil {
		return nil, err
	}

	var inject []*baagentv1.ChatMessage
	for _, m := range res.GetMessages() {
		if strings.TrimSpace(m.GetContent()) == "" {
			continue
		}
		inject = append(inject, &baagentv1.ChatMessage{
			Role:    baagentv1.Role_ROLE_SYSTEM,
			Kind:    baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION,
			Content: m.GetContent(),
		})
	}
	obs := fmt.Sprintf("Skill %q activated (activation chain: %s). Its instructions follow; apply them to the user's request.",
		res.GetSkillName(), strings.Join(newChain, " → "))
	mod := res.GetContextModifier()
	if l := mod.GetAllowedTools(); l != nil {
		if len(l.GetNames()) == 0 {
			obs += " While it is active no tools are available."
		} else {
			obs += " While it is active only these tools are available: " + strings.Join(l.GetNames(), ", ") + "."
		}
	}
	if m := mod.GetModel(); m != "" {
		obs += " It runs on the model " + m + "."
	}
	out := r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: obs,
		Success:     true,
		DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
	})
	out.inject = inject
	return out, nil
}
