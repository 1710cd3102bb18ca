package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/skillstack"
)

// Values of Options.SkillTriggers (-skill-triggers).
const (
	// SkillTriggersActivate activates the skill a user message asks for
	// before the first model call.
	SkillTriggersActivate = "activate"
	// SkillTriggersSuggest tells the model which skills the message's
	// trigger phrases match; an explicit /skill-name still activates.
	SkillTriggersSuggest = "suggest"
	// SkillTriggersOff ignores both.
	SkillTriggersOff = "off"
)

func checkSkillTriggers(v string) error {
	switch v {
	case SkillTriggersActivate, SkillTriggersSuggest, SkillTriggersOff:
		return nil
	}
	return fmt.Errorf("want activate, suggest or off, got %q", v)
}

// beginRound prepares the skills of a new round of the conversation before
// its first model call: the skills active at the end of the previous round
// are activated again (restored), then the skill the user's message asks
// for (an explicit /skill-name, or a trigger phrase) is activated or
// suggested. What it injects (instructions, notes) enters the history
// after the user's message. Sub-agent runs have no rounds.
func (r *run) beginRound(ctx context.Context) error {
	if _, child := r.subAgent(); child || !r.offersSkills() {
		return nil
	}
	msgs, err := r.restoreSkills(ctx)
	if err != nil {
		return err
	}
	more, err := r.triggerSkills(ctx)
	if err != nil {
		return err
	}
	msgs = append(msgs, more...)
	for k, m := range msgs {
		m.Id = fmt.Sprintf("%s:round:%d", r.rec.GetRunId(), k)
	}
	return r.appendMessages(ctx, msgs...)
}

// restoreSkills activates again, with origin RESTORED and the revision
// each had, the skills active when the conversation's previous round
// ended. A skill whose revision is unchanged gets no instructions: the
// previous round's are in the history. A skill whose content changed gets
// its current instructions; one deleted or disabled meanwhile ends
// (skill_ended, reason removed) with a note to the model.
func (r *run) restoreSkills(ctx context.Context) ([]*baagentv1.ChatMessage, error) {
	store, err := r.s.skillStacks(ctx)
	if err != nil {
		r.log.Warn("the conversation's skills cannot be restored", "error", err)
		return nil, nil
	}
	saved, err := store.Load(ctx, r.rec.GetTenant(), r.rec.GetConversationId())
	if err != nil || saved == nil {
		if err != nil {
			r.log.Warn("the conversation's skills cannot be restored", "error", err)
		}
		return nil, nil
	}
	var msgs []*baagentv1.ChatMessage
	for k, f := range saved.Frames {
		id := fmt.Sprintf("%s:restored:%d", r.rec.GetRunId(), k)
		res, ref, err := r.callActivate(ctx, f.Name, id, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED, f.Revision)
		if err != nil {
			return nil, err
		}
		if ref != nil {
			if err := r.emitEnded([]endedSkill{{a: skillstack.Activation{Name: f.Name, ID: f.ID}, chain: r.skills.Chain()}}, skillEndedRemoved); err != nil {
				return nil, err
			}
			msgs = append(msgs, systemNote(fmt.Sprintf(
				"Skill %q, active at the end of the previous round, is no longer available (%s). Its instructions above no longer apply and its tool restrictions are lifted.",
				f.Name, ref.message)))
			continue
		}
		changed := res.GetRevision() != f.Revision
		reason := "restored from the previous round of the conversation"
		if changed {
			reason += fmt.Sprintf("; its content changed since (revision %s → %s), so its instructions were loaded again", orNone(f.Revision), orNone(res.GetRevision()))
		}
		inject, err := r.applyActivation(res, id, baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_RESTORED, reason, changed)
		if err != nil {
			return nil, err
		}
		if len(inject) > 0 {
			msgs = append(msgs, systemNote(fmt.Sprintf("Skill %q changed since the previous round; its current instructions follow and replace the earlier ones.", res.GetSkillName())))
			msgs = append(msgs, inject...)
		}
	}
	return msgs, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// triggerSkills asks the skills service which skills the user's message
// asks for and, per Options.SkillTriggers, activates the first (an
// explicit /skill-name before a trigger phrase) or suggests them. It never
// fails the run over triggers: a skills service without MatchTriggers, or
// one that fails it, means no triggers.
func (r *run) triggerSkills(ctx context.Context) ([]*baagentv1.ChatMessage, error) {
	mode := r.s.opts.SkillTriggers
	if mode == SkillTriggersOff || strings.TrimSpace(r.rec.GetInput()) == "" {
		return nil, nil
	}
	resp, err := r.s.opts.Skills.MatchTriggers(ctx, &baagentv1.MatchTriggersRequest{
		Tenant: r.rec.GetTenant(), Project: r.rec.GetProject(), Text: r.rec.GetInput(),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if status.Code(err) == codes.Unimplemented {
			if r.s.noTriggers.CompareAndSwap(false, true) {
				r.log.Info("the skills service does not match triggers (MatchTriggers unimplemented); skill triggers are off")
			}
			return nil, nil
		}
		r.log.Warn("skill triggers not matched", "error", err)
		return nil, nil
	}
	var activate *baagentv1.TriggerMatch
	var suggest []*baagentv1.TriggerMatch
	for _, m := range resp.GetMatches() {
		explicit := m.GetOrigin() == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER
		if activate == nil && (mode == SkillTriggersActivate || explicit) {
			activate = m
			continue
		}
		suggest = append(suggest, m)
	}
	var msgs []*baagentv1.ChatMessage
	if activate != nil {
		more, err := r.activateTriggered(ctx, activate)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, more...)
	}
	if len(suggest) > 0 {
		parts := make([]string, len(suggest))
		for i, m := range suggest {
			parts[i] = fmt.Sprintf("%s (%s)", m.GetSkillName(), triggerReason(m))
		}
		msgs = append(msgs, systemNote("The user's message matches these skills: "+strings.Join(parts, "; ")+
			". If one fits the task, activate it with the skill tool."))
	}
	return msgs, nil
}

// activateTriggered activates the skill a user message asked for, with the
// message's origin (USER or TRIGGER), before the first model call.
func (r *run) activateTriggered(ctx context.Context, m *baagentv1.TriggerMatch) ([]*baagentv1.ChatMessage, error) {
	origin := m.GetOrigin()
	if origin != baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER {
		origin = baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_TRIGGER
	}
	reason := triggerReason(m)
	id := r.rec.GetRunId() + ":trigger"
	res, ref, err := r.callActivate(ctx, m.GetSkillName(), id, origin, "")
	if err != nil {
		return nil, err
	}
	if ref != nil {
		r.log.Info("skill asked for by the user's message not activated", "skill", m.GetSkillName(), "reason", ref.message)
		return []*baagentv1.ChatMessage{systemNote(fmt.Sprintf("The user's message asks for skill %q (%s), but it could not be activated: %s",
			m.GetSkillName(), reason, ref.message))}, nil
	}
	inject, err := r.applyActivation(res, id, origin, reason, true)
	if err != nil || res.GetAlreadyActive() {
		return nil, err
	}
	note := systemNote(fmt.Sprintf("Skill %q was activated because %s (activation chain: %s). Its instructions follow; apply them to the user's request.",
		res.GetSkillName(), reason, strings.Join(r.skills.Chain(), " → ")))
	return append([]*baagentv1.ChatMessage{note}, inject...), nil
}

// triggerReason says in words why a message asked for a skill.
func triggerReason(m *baagentv1.TriggerMatch) string {
	if m.GetOrigin() == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_USER {
		matched := m.GetMatched()
		if matched == "" {
			matched = "/" + m.GetSkillName()
		}
		return "the message names " + matched
	}
	return fmt.Sprintf("the message matched the trigger %q", m.GetMatched())
}

// systemNote is a note from the platform to the model.
func systemNote(text string) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{Role: baagentv1.Role_ROLE_SYSTEM, Content: text}
}

// saveSkills stores the run's skill stack as the conversation's, for its
// next round; an empty stack clears it. Called when the round ends. A
// failure is logged: the next round then starts without them.
func (r *run) saveSkills(ctx context.Context) {
	if _, child := r.subAgent(); child || !r.roundReady {
		return
	}
	store, err := r.s.skillStacks(ctx)
	if err == nil {
		r.cpMu.Lock()
		frames := r.skills.Snapshot()
		r.cpMu.Unlock()
		err = store.Save(ctx, r.rec.GetTenant(), r.rec.GetConversationId(), &skillstack.Saved{RunID: r.rec.GetRunId(), At: time.Now(), Frames: frames})
	}
	if err != nil {
		r.log.Warn("the conversation's active skills not saved for its next round", "error", err)
	}
}
