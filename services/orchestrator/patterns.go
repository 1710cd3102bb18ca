package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/textcut"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
	"github.com/baagent/baagent/services/orchestrator/internal/patterntrace"
)

// Interaction patterns (docs/concepts/patterns.md, "In runs"): at the start
// of a top-level run the memory service is asked for the patterns of the
// tenant that match the request. The best one is announced
// (pattern_matched); a `reference` pattern goes into the run's system
// prompt as a reference, a `reuse` one is offered to the user as a
// decision (Reuse / Plan from scratch) and, accepted, goes into the system
// prompt as the approach to follow. The match and the decision are kept in
// the run's checkpoint: a resumed run neither matches nor asks again. When
// the run ends its trace (patterns_record.go) is queued for the memory
// service to learn from.

// Bounds and waits of matching.
const (
	// patternMatchTimeout bounds MatchPatterns: a slow memory service
	// delays the run's start by at most this much.
	patternMatchTimeout = 2 * time.Second
	// patternGuidanceBytes bounds the guidance a pattern adds to the
	// system prompt.
	patternGuidanceBytes = 4 << 10
	// patternGoalBytes is the most of the input MatchPatterns takes.
	patternGoalBytes = 16 << 10
	// patternDecisionID is the id of the reuse decision, unique in a run.
	patternDecisionID = patterntrace.PatternDecisionPrefix + "reuse"
	// cpPatternDecided is the checkpoint of a settled reuse decision.
	cpPatternDecided = "PATTERN_DECIDED"
)

// Outcomes of a match, the label of pattern_matches_total, and of a reuse
// decision, the label of pattern_decisions_total.
const (
	matchReuse         = patterntrace.ModeReuse
	matchReference     = patterntrace.ModeReference
	matchNone          = "none"          // no candidate, or patterns switched off
	matchError         = "error"         // the memory service failed
	matchUnimplemented = "unimplemented" // a memory service without patterns
	decisionReuse      = "reuse"
	decisionScratch    = "scratch"
	decisionTimedOut   = "timed_out"
)

// matchPattern asks the memory service for patterns matching the run's
// request, once per run (the result is in every later checkpoint), and
// announces the best. For a `reuse` match it pauses the run on the reuse
// decision. A failure of the memory service is logged and counted; the
// run goes on without a pattern.
func (r *run) matchPattern(ctx context.Context) error {
	if r.pattern != nil || r.s.opts.Memory == nil || r.rec.GetParentRunId() != "" {
		return nil
	}
	r.pattern = &checkpoint.Pattern{Checked: true}
	mctx, cancel := context.WithTimeout(ctx, patternMatchTimeout)
	resp, err := r.s.opts.Memory.MatchPatterns(mctx, &baagentv1.MatchPatternsRequest{
		Tenant:         r.rec.GetTenant(),
		Goal:           textcut.Mark(strings.ToValidUTF8(r.rec.GetInput(), "\uFFFD"), patternGoalBytes),
		ConversationId: r.rec.GetConversationId(),
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if status.Code(err) == codes.Unimplemented {
			r.s.metrics.patterns.matches.WithLabelValues(matchUnimplemented).Inc()
			r.log.Debug("memory service does not implement MatchPatterns; the run goes on without patterns")
			return nil
		}
		r.s.metrics.patterns.matches.WithLabelValues(matchError).Inc()
		r.log.Warn("interaction patterns not matched; the run goes on without them", "error", err)
		return nil
	}
	best := bestCandidate(resp.GetCandidates())
	if best == nil {
		r.s.metrics.patterns.matches.WithLabelValues(matchNone).Inc()
		return nil
	}
	p := best.GetPattern()
	r.pattern.ID, r.pattern.Name, r.pattern.Score = p.GetId(), textcut.Mark(p.GetName(), 200), best.GetScore().GetScore()
	r.pattern.Mode, r.pattern.Shared = best.GetMode(), p.GetShared()
	r.pattern.Guidance = PatternGuidance(p)
	matched := &baagentv1.PatternMatchedPayload{
		PatternId: p.GetId(), Name: r.pattern.Name, Score: r.pattern.Score, Mode: r.pattern.Mode,
		Breakdown: best.GetScore(), Shared: r.pattern.Shared,
	}
	if r.pattern.Mode == matchReuse {
		r.pattern.DecisionID = patternDecisionID
		matched.DecisionId = patternDecisionID
	}
	r.s.metrics.patterns.matches.WithLabelValues(r.pattern.Mode).Inc()
	r.log.Info("interaction pattern matched", "pattern_id", p.GetId(), "score", r.pattern.Score, "mode", r.pattern.Mode, "shared", r.pattern.Shared)
	if err := r.emit(&baagentv1.Event{Payload: &baagentv1.Event_PatternMatched{PatternMatched: matched}}); err != nil {
		return err
	}
	if r.pattern.Mode != matchReuse {
		return nil
	}
	return r.pause(-1, reuseQuestion(r.pattern, r.rec.GetStep(), r.s.opts.DecisionTimeout, time.Now()))
}

// bestCandidate is the first candidate (they come best first) with a mode
// the run acts on and a pattern.
func bestCandidate(cs []*baagentv1.PatternCandidate) *baagentv1.PatternCandidate {
	for _, c := range cs {
		if c.GetPattern().GetId() == "" {
			continue
		}
		switch c.GetMode() {
		case matchReuse, matchReference:
			return c
		}
	}
	return nil
}

// reuseQuestion is the decision offering the matched pattern.
func reuseQuestion(p *checkpoint.Pattern, step int32, timeout time.Duration, now time.Time) *hitl.Wait {
	w := &hitl.Wait{Kind: hitl.KindPattern, ID: p.DecisionID, Deadline: now.Add(timeout)}
	hitl.SetQuestion(w, &baagentv1.PendingInput{Question: &baagentv1.PendingInput_Decision{Decision: &baagentv1.DecisionPoint{
		DecisionId: p.DecisionID, DecisionType: baagentv1.DecisionType_DECISION_TYPE_METHOD, StepNumber: step,
		Context: textcut.Mark(fmt.Sprintf("A saved approach '%s' matches this request (score %.2f). Reuse it?", p.Name, p.Score), hitl.MaxQuestionText),
		Options: []*baagentv1.DecisionOption{
			{Label: patterntrace.ReuseLabel, Description: "Follow the saved approach: its steps and tools.", IsRecommended: true},
			{Label: patterntrace.FromScratchLabel, Description: "Work out the approach for this request anew."},
		},
		TimeoutSeconds: int32(timeout.Seconds()),
	}}})
	return w
}

// settlePattern settles the reuse decision once it is answered or due:
// decision_answered is published with the checkpoint that records the
// outcome (held in its outbox), so a resumed run finds it settled and
// publishes nothing again. Without an answer in time the run plans from
// scratch.
func (r *run) settlePattern(w *hitl.Wait) error {
	p := r.pattern
	if p == nil || w == nil || w.Kind != hitl.KindPattern || p.Decision != "" {
		return nil
	}
	ans := &baagentv1.DecisionAnsweredPayload{DecisionId: w.ID, TimedOut: w.Answer == nil}
	switch {
	case w.Answer == nil:
		p.Decision = decisionTimedOut
	case strings.EqualFold(w.Answer.Text, patterntrace.ReuseLabel):
		p.Decision = decisionReuse
	default:
		p.Decision = decisionScratch
	}
	if w.Answer != nil {
		ans.Answer, ans.SelectedOptions = w.Answer.Text, w.Answer.Selected
	}
	if err := r.hold(&baagentv1.Event{Payload: &baagentv1.Event_DecisionAnswered{DecisionAnswered: ans}}); err != nil {
		return err
	}
	r.wait = nil
	if err := r.checkpoint(cpPatternDecided); err != nil {
		return err
	}
	if err := r.flush(); err != nil {
		return err
	}
	r.s.metrics.patterns.decisions.WithLabelValues(p.Decision).Inc()
	r.log.Info("reuse of the interaction pattern decided", "pattern_id", p.ID, "decision", p.Decision)
	return nil
}

// patternCheckpoint is the pattern state a checkpoint keeps (a copy).
func (r *run) patternCheckpoint() *checkpoint.Pattern {
	if r.pattern == nil {
		return nil
	}
	p := *r.pattern
	return &p
}

// restorePattern takes the pattern state of a checkpoint, with its
// guidance bounded as when it was made.
func (r *run) restorePattern(p *checkpoint.Pattern) {
	if p == nil {
		return
	}
	c := *p
	c.Guidance = textcut.Mark(strings.ToValidUTF8(c.Guidance, "\uFFFD"), patternGuidanceBytes)
	r.pattern = &c
}

// patternMessage is the system message the matched pattern adds to every
// window of the run: a reference, or the approach to follow once the
// user accepted to reuse it; nil otherwise.
func (r *run) patternMessage() []*baagentv1.ChatMessage {
	p := r.pattern
	if p == nil || p.Guidance == "" {
		return nil
	}
	var intro string
	switch {
	case p.Mode == matchReference:
		intro = "# Reference: a similar past task\nA similar past task was done like this. It is a reference, not a script: use what fits this request, and plan the rest yourself."
	case p.Mode == matchReuse && p.Decision == decisionReuse:
		intro = "# Proven approach\nThe user chose to reuse a saved approach for this kind of request. Follow this proven approach, adapting names, periods and values to this request."
	default:
		return nil
	}
	return []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_SYSTEM, Content: intro + "\n\n" + p.Guidance}}
}

// PatternGuidance renders a pattern for a run's system prompt: its name
// and description, its steps with their tools, its best tool chain, the
// decisions users prefer and the corrections they made. At most 4 KiB.
func PatternGuidance(p *baagentv1.InteractionPattern) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		if b.Len() < patternGuidanceBytes {
			fmt.Fprintf(&b, format+"\n", args...)
		}
	}
	one := func(s string, n int) string {
		return textcut.Mark(strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " "), n)
	}
	line("Approach: %s", one(p.GetName(), 200))
	if d := one(p.GetDescription(), 400); d != "" {
		line("Task: %s", d)
	}
	if len(p.GetSteps()) > 0 {
		line("Steps:")
		for i, s := range p.GetSteps() {
			text := fmt.Sprintf("%d. %s", i+1, one(s.GetDescription(), 300))
			if len(s.GetTools()) > 0 {
				text += " (tools: " + one(strings.Join(s.GetTools(), ", "), 200) + ")"
			}
			if o := one(s.GetExpectedOutput(), 200); o != "" {
				text += " → " + o
			}
			line("%s", text)
			for _, c := range s.GetCorrections() {
				line("   Users corrected: %s", one(c, 200))
			}
		}
	}
	if chains := p.GetToolChains(); len(chains) > 0 && len(chains[0].GetTools()) > 0 {
		line("Tool chain that worked: %s", one(strings.Join(chains[0].GetTools(), " → "), 600))
	}
	if len(p.GetDecisions()) > 0 {
		line("Decisions users made:")
		for _, d := range p.GetDecisions() {
			if d.GetRecommended() != "" {
				line("- %s → %s", one(d.GetQuestion(), 200), one(d.GetRecommended(), 100))
			}
		}
	}
	if cs := p.GetSuccessFactors().GetCommonCorrections(); len(cs) > 0 {
		line("Common corrections:")
		for _, c := range cs {
			line("- %s", one(c, 200))
		}
	}
	return textcut.Mark(strings.TrimSpace(b.String()), patternGuidanceBytes)
}
