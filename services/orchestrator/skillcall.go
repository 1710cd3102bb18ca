package orchestrator

import (
	"context"
	"fmt"
	"slices"
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

// Reasons a skill's scope ends (skill_ended.reason).
const (
	skillEndedDone    = "done"
	skillEndedSibling = "sibling"
	skillEndedRemoved = "removed"
)

// codeSkillNotActive is the error of a skill call that names a skill that
// is not active (ending it, reading its files).
const codeSkillNotActive = "SKILL_NOT_ACTIVE"

// activateSkill answers a call of the skill meta-tool: an activation
// (ActivateSkill on the skills service with the run's activation chain;
// the skill's messages are injected after the step's tool results and its
// context modifier applies from the next step on), or the end of an
// active skill's scope. A refused activation (cycle, depth, unknown or
// disabled skill, a skill only the user may invoke, bad arguments) is an
// error observation the model can act on.
func (r *run) activateSkill(ctx context.Context, i int, c *baagentv1.ToolCall) (*callResult, error) {
	ctx, span := r.s.span(ctx, "activate_skill", trace.SpanKindInternal)
	res, err := r.activateSkillTraced(ctx, i, c)
	if span.IsRecording() {
		a, _ := parseSkillArgs(c.GetArguments())
		span.SetAttributes(attribute.String("baagent.skill.name", a.name), attribute.String("baagent.skill.action", a.action),
			attribute.String("gen_ai.tool.call.id", c.GetId()), attribute.Int("baagent.skill.depth", r.skills.Depth()))
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
	a, err := parseSkillArgs(c.GetArguments())
	if err != nil {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, err.Error()), nil
	}
	if a.action == skillActionEnd {
		return r.endSkill(c, began, a.name)
	}
	if why := r.skillRefused(a.name); why != "" {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, codeSkillNotAllowed, why), nil
	}
	activationID := fmt.Sprintf("%s:s%d:%d", r.rec.GetRunId(), r.rec.GetStep(), i)
	// A resumed step may find this very activation on the stack already:
	// a parallel call's checkpoint took the stack after the push but
	// before this call's result was recorded. Take it off, so that the
	// call activates afresh (and injects the instructions) instead of
	// finding the skill already active.
	r.cpMu.Lock()
	if k := slices.IndexFunc(r.skills.Frames(), func(a skillstack.Activation) bool { return a.ID == activationID }); k >= 0 {
		r.skills.EndFrom(k)
	}
	r.cpMu.Unlock()
	res, ref, err := r.callActivate(ctx, a.name, activationID, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL, "")
	if err != nil {
		return nil, err
	}
	if ref != nil {
		return r.failedCall(c, began, ref.kind, ref.code, ref.message), nil
	}
	inject, err := r.applyActivation(res, activationID, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL, "the model called the skill tool", true)
	if err != nil {
		return nil, err
	}
	out := r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: activationObservation(res, r.skills.Chain()),
		Success:     true,
		DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
	})
	out.inject = inject
	return out, nil
}

// activationObservation is what the model reads after activating a skill.
func activationObservation(res *baagentv1.SkillActivationResult, chain []string) string {
	if res.GetAlreadyActive() {
		return fmt.Sprintf("Skill %q is already active (activation chain: %s); its instructions are above in the conversation. Nothing was loaded again.",
			res.GetSkillName(), strings.Join(chain, " → "))
	}
	obs := fmt.Sprintf("Skill %q activated (activation chain: %s). Its instructions follow; apply them to the user's request.",
		res.GetSkillName(), strings.Join(chain, " → "))
	if ended := res.GetEnded(); len(ended) > 0 {
		obs += " It took the place of " + strings.Join(ended, ", ") + ", whose scope ended."
	}
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
	obs += ` Read the files its instructions name with skill_read; when its part of the task is done, end it with skill {"name": "` +
		res.GetSkillName() + `", "action": "end"}.`
	return obs
}

// refusal is an activation the skills service (or the run) refused, as a
// tool error.
type refusal struct {
	kind    baagentv1.ToolErrorType
	code    string
	message string
}

// callActivate asks the skills service to activate name on top of the
// run's stack. A refusal the model (or the user) can act on is returned
// as such; err is a failure that ends the run (the service unreachable).
func (r *run) callActivate(ctx context.Context, name, activationID string, origin baagentv1.SkillActivationOrigin, revision string) (*baagentv1.SkillActivationResult, *refusal, error) {
	chain := r.skills.Chain()
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
		Origin:          origin,
		Revision:        revision,
	}})
	if err != nil && ctx.Err() == nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.FailedPrecondition, codes.PermissionDenied:
			return nil, &refusal{baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeSkillRefused, st.Message()}, nil
		case codes.NotFound:
			return nil, &refusal{baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, codeSkillNotFound,
				fmt.Sprintf("There is no skill named %q. Use a name from the skills catalog.", name)}, nil
		case codes.InvalidArgument:
			return nil, &refusal{baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, codeInvalidArguments, st.Message()}, nil
		}
	}
	if err != nil {
		return nil, nil, peerError(ctx, "skills", "ActivateSkill", err)
	}
	res := resp.GetResult()
	if !res.GetSuccess() {
		msg := res.GetError()
		if msg == "" {
			msg = fmt.Sprintf("The skills service refused to activate %q without saying why.", name)
		}
		return nil, &refusal{baagentv1.ToolErrorType_TOOL_ERROR_TYPE_VALIDATION_ERROR, codeSkillRefused, msg}, nil
	}
	if res.GetSkillName() == "" {
		res.SkillName = name
	}
	return res, nil, nil
}

// applyActivation applies an accepted activation to the run: the skills
// whose scope it ended are popped (skill_ended, reason sibling), the skill
// is pushed with its context modifier, skill_activated is published, and
// the skill's instructions are returned to inject (when inject is set). An
// activation of the skill already innermost changes nothing and publishes
// nothing.
func (r *run) applyActivation(res *baagentv1.SkillActivationResult, activationID string, origin baagentv1.SkillActivationOrigin, reason string, inject bool) ([]*baagentv1.ChatMessage, error) {
	if res.GetAlreadyActive() {
		return nil, nil
	}
	// The stack is part of every checkpoint, and the step's other calls,
	// finishing in parallel, take checkpoints: change it under cpMu.
	r.cpMu.Lock()
	var ended []endedSkill
	for _, name := range res.GetEnded() {
		for _, a := range r.skills.Remove([]string{name}) {
			ended = append(ended, endedSkill{a: a, chain: r.skills.Chain()})
		}
	}
	r.skills.Push(skillstack.Activation{Name: res.GetSkillName(), ID: activationID, Revision: res.GetRevision(), Modifier: res.GetContextModifier()})
	chain := r.skills.Chain()
	r.cpMu.Unlock()
	if got := res.GetActivationChain(); len(got) > 0 && strings.Join(got, "\x00") != strings.Join(chain, "\x00") {
		r.log.Warn("the skills service's activation chain differs from the run's stack", "service", got, "run", chain)
	}
	if err := r.emitEnded(ended, skillEndedSibling); err != nil {
		return nil, err
	}
	r.metrics.RecordSkill(res.GetSkillName())
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_SkillActivated{SkillActivated: &baagentv1.SkillActivatedPayload{
		SkillName:       res.GetSkillName(),
		ActivationId:    activationID,
		ActivationChain: chain,
		ContextModifier: res.GetContextModifier(),
		Scope:           res.GetScope(),
		Origin:          origin,
		Reason:          reason,
		Ended:           res.GetEnded(),
		Revision:        res.GetRevision(),
	}}}); err != nil {
		return nil, err
	}
	if !inject {
		return nil, nil
	}
	var msgs []*baagentv1.ChatMessage
	for _, m := range res.GetMessages() {
		if strings.TrimSpace(m.GetContent()) == "" {
			continue
		}
		msgs = append(msgs, &baagentv1.ChatMessage{
			Role:    baagentv1.Role_ROLE_SYSTEM,
			Kind:    baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION,
			Content: m.GetContent(),
		})
	}
	return msgs, nil
}

// endedSkill is a popped activation and the chain after its pop.
type endedSkill struct {
	a     skillstack.Activation
	chain []string
}

// emitEnded publishes one skill_ended per popped skill, in order.
func (r *run) emitEnded(ended []endedSkill, reason string) error {
	for _, e := range ended {
		if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_SkillEnded{SkillEnded: &baagentv1.SkillEndedPayload{
			SkillName:       e.a.Name,
			ActivationId:    e.a.ID,
			ActivationChain: e.chain,
			Reason:          reason,
		}}}); err != nil {
			return err
		}
	}
	return nil
}

// endSkill answers {"name": X, "action": "end"}: X's scope ends, and with
// it the scope of every skill nested in X; their context modifiers no
// longer apply from the next step on.
func (r *run) endSkill(c *baagentv1.ToolCall, began time.Time, name string) (*callResult, error) {
	r.cpMu.Lock()
	i := r.skills.Index(name)
	var ended []endedSkill
	if i >= 0 {
		before := r.skills.Chain()
		for k, a := range r.skills.EndFrom(i) {
			ended = append(ended, endedSkill{a: a, chain: before[:len(before)-k-1]})
		}
	}
	chain := r.skills.Chain()
	r.cpMu.Unlock()
	if i < 0 {
		return r.failedCall(c, began, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_NOT_FOUND, codeSkillNotActive,
			fmt.Sprintf("Skill %q is not active, so there is nothing to end. %s", name, activeSkillsSentence(chain))), nil
	}
	if err := r.emitEnded(ended, skillEndedDone); err != nil {
		return nil, err
	}
	names := make([]string, len(ended))
	for k, e := range ended {
		names[k] = e.a.Name
	}
	obs := fmt.Sprintf("Skill %q ended", name)
	if len(names) > 1 {
		obs += " together with the skills nested in it (" + strings.Join(names[:len(names)-1], ", ") + ")"
	}
	obs += "; its tool restrictions no longer apply and its instructions no longer bind you. " + activeSkillsSentence(chain)
	return r.result(c, began, &baagentv1.ObservePayload{
		ToolCallId:  c.GetId(),
		ToolName:    c.GetName(),
		Observation: obs,
		Success:     true,
		DurationMs:  float64(time.Since(began).Microseconds()) / 1000,
	}), nil
}

// activeSkillsSentence names the active skills for an observation.
func activeSkillsSentence(chain []string) string {
	if len(chain) == 0 {
		return "No skill is active now."
	}
	return "Active skills: " + strings.Join(chain, " → ") + "."
}
