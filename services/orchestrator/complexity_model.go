package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/workplan"
)

// classifyTimeout bounds the model-assisted classification: a slow model
// must not hold the run's start.
const classifyTimeout = 20 * time.Second

// classifyPrompt asks for one word.
const classifyPrompt = `Classify how much work the user's request needs. Answer with exactly one word:
SIMPLE (one or two steps, answered directly), MODERATE (three to five steps) or COMPLEX (six steps or more: several requests, analyses over periods or entities, a report).`

// classifyByModel asks the run's model for the request's complexity: one
// short call without tools. Any error (the call, an answer that is not one
// of the three words) lets the rules decide.
func (r *run) classifyByModel(ctx context.Context) (baagentv1.QueryComplexity, error) {
	ctx, cancel := context.WithTimeout(ctx, classifyTimeout)
	defer cancel()
	resp, err := r.s.opts.Model.Stream(ctx, ModelRequest{Model: r.rec.GetModel(), Messages: []*baagentv1.ChatMessage{
		{Role: baagentv1.Role_ROLE_SYSTEM, Content: classifyPrompt},
		{Role: baagentv1.Role_ROLE_USER, Content: workplan.Cut(r.rec.GetInput(), 8<<10)},
	}}, func(ModelDelta) {})
	if err != nil {
		return 0, err
	}
	if resp == nil || resp.Message == nil {
		return 0, fmt.Errorf("the model returned no message")
	}
	return parseComplexityAnswer(resp.Message.GetContent())
}

// parseComplexityAnswer reads the model's one-word answer.
func parseComplexityAnswer(s string) (baagentv1.QueryComplexity, error) {
	w := strings.ToUpper(strings.Trim(strings.TrimSpace(s), ".*`\"' "))
	switch w {
	case "SIMPLE":
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_SIMPLE, nil
	case "MODERATE":
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_MODERATE, nil
	case "COMPLEX":
		return baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX, nil
	}
	return 0, fmt.Errorf("the model answered %q, not SIMPLE, MODERATE or COMPLEX", workplan.Cut(s, 40))
}
