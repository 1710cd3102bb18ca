// Package hitl holds the questions a run asks the user (human in the
// loop): the ask tools' schemas and arguments, the platform's own
// decisions, the wait a run stores in its checkpoint, and the checking of
// an answer.
package hitl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/protoenc"
)

// The ask tools' names.
const (
	ClarificationTool = "ask_clarification"
	DecisionTool      = "ask_decision"
)

// Limits of a question.
const (
	maxInputTimeout = time.Hour
	maxInputOptions = 10
	maxOptionLabel  = 200
	MaxQuestionText = 4000
)

// Kinds of waits.
const (
	KindClarification = "clarification"
	KindDecision      = "decision"
	KindDoomLoop      = "doom_loop"
	KindPermission    = "permission"
	// KindPlan: the user approves, edits or cancels a work plan.
	KindPlan = "plan"
	// KindSubAgent: the run waits for the sub-agent run it started with
	// the task tool (not for the user: the run stays RUNNING).
	KindSubAgent = "subagent"
	// KindPattern: the user decides whether the run reuses a matched
	// interaction pattern; asked at the run's start, about no tool call.
	KindPattern = "pattern"
)

// Labels of the doom-loop and permission decisions.
const (
	LabelStop     = "stop"
	LabelContinue = "continue"
	LabelCorrect  = "correct"
	LabelAllow    = "allow"
	LabelDeny     = "deny"
	LabelApprove  = "approve"
	LabelEdit     = "edit"
	LabelCancel   = "cancel"
)

// Wait is the question a run waits on.
type Wait struct {
	Kind      string    `json:"kind"`
	ID        string    `json:"id"`
	CallIndex int       `json:"call_index"` // the step's tool call it concerns
	Question  []byte    `json:"question"`   // the PendingInput
	Deadline  time.Time `json:"deadline"`
	// WorkSeq is the stream sequence of the run's work item while it
	// waits, so that an answer can replace it with one due at once.
	WorkSeq uint64  `json:"work_seq,omitempty"`
	Answer  *Answer `json:"answer,omitempty"`
	// Child is the sub-agent run a KindSubAgent waits for; its end sets
	// Answer (the child's final state) and wakes the run.
	Child string `json:"child,omitempty"`
}

// Answer is a validated SubmitInput.
type Answer struct {
	Text         string    `json:"text,omitempty"`
	Selected     []string  `json:"selected,omitempty"`
	Intervention int32     `json:"intervention,omitempty"`
	At           time.Time `json:"at"`
}

// Pending decodes the question.
func (w *Wait) Pending() *baagentv1.PendingInput {
	p, err := protoenc.Unmarshal[baagentv1.PendingInput](w.Question)
	if err != nil {
		return &baagentv1.PendingInput{}
	}
	return p
}

// Due reports whether the run can go on: answered, or past the deadline.
func (w *Wait) Due(now time.Time) bool {
	return w.Answer != nil || !now.Before(w.Deadline)
}

func AskToolSchemas() []*baagentv1.ToolSchema {
	option := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"label":          map[string]any{"type": "string", "description": "Short display text (1-5 words)."},
			"description":    map[string]any{"type": "string", "description": "What choosing it means."},
			"is_recommended": map[string]any{"type": "boolean", "description": "Whether it is the Recommended option (used when the user does not answer)."},
		},
		"required": []any{"label"},
	}
	decisionOption := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"label":                 map[string]any{"type": "string"},
			"description":           map[string]any{"type": "string"},
			"estimated_duration_ms": map[string]any{"type": "integer"},
			"resource_usage":        map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"is_recommended":        map[string]any{"type": "boolean"},
		},
		"required": []any{"label"},
	}
	clar, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"question_type":   map[string]any{"type": "string", "enum": []any{"scope", "approach", "prerequisite", "priority"}},
			"question":        map[string]any{"type": "string"},
			"options":         map[string]any{"type": "array", "items": option, "maxItems": maxInputOptions},
			"required":        map[string]any{"type": "boolean"},
			"timeout_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": int(maxInputTimeout.Seconds())},
		},
		"required": []any{"question_type", "question"},
	})
	dec, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision_type":   map[string]any{"type": "string", "enum": []any{"branch", "method", "confirmation", "risk", "custom"}},
			"context":         map[string]any{"type": "string"},
			"options":         map[string]any{"type": "array", "items": decisionOption, "maxItems": maxInputOptions},
			"allow_multiple":  map[string]any{"type": "boolean"},
			"timeout_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": int(maxInputTimeout.Seconds())},
		},
		"required": []any{"decision_type", "context", "options"},
	})
	return []*baagentv1.ToolSchema{
		{Name: ClarificationTool, Description: "Ask the user a clarification question about the request (scope, approach, prerequisite or priority) " +
			"before planning further. Offer short options and mark the one you recommend; the user may also answer in free text. " +
			"Without an answer within timeout_seconds (default 60) the Recommended option is used.", Parameters: clar},
		{Name: DecisionTool, Description: "Ask the user to decide at a key point of the work (a branch, a method, confirming an operation, accepting a risk). " +
			"Without an answer within timeout_seconds (default 300) the Recommended option is used.", Parameters: dec},
	}
}

// askArgs is the union of both tools' arguments.
type askArgs struct {
	QuestionType   string      `json:"question_type"`
	Question       string      `json:"question"`
	DecisionType   string      `json:"decision_type"`
	Context        string      `json:"context"`
	Options        []askOption `json:"options"`
	Required       bool        `json:"required"`
	AllowMultiple  bool        `json:"allow_multiple"`
	TimeoutSeconds int         `json:"timeout_seconds"`
}

type askOption struct {
	Label               string            `json:"label"`
	Description         string            `json:"description"`
	EstimatedDurationMs *int64            `json:"estimated_duration_ms"`
	ResourceUsage       map[string]string `json:"resource_usage"`
	IsRecommended       bool              `json:"is_recommended"`
}

var clarificationTypes = map[string]baagentv1.ClarificationType{
	"scope": baagentv1.ClarificationType_CLARIFICATION_TYPE_SCOPE, "approach": baagentv1.ClarificationType_CLARIFICATION_TYPE_APPROACH,
	"prerequisite": baagentv1.ClarificationType_CLARIFICATION_TYPE_PREREQUISITE, "priority": baagentv1.ClarificationType_CLARIFICATION_TYPE_PRIORITY,
}

var decisionTypes = map[string]baagentv1.DecisionType{
	"branch": baagentv1.DecisionType_DECISION_TYPE_BRANCH, "method": baagentv1.DecisionType_DECISION_TYPE_METHOD,
	"confirmation": baagentv1.DecisionType_DECISION_TYPE_CONFIRMATION, "risk": baagentv1.DecisionType_DECISION_TYPE_RISK_ACCEPTANCE,
	"custom": baagentv1.DecisionType_DECISION_TYPE_CUSTOM,
}

// Timeouts are the waits of questions that set no timeout_seconds.
type Timeouts struct {
	Clarification, Decision time.Duration
}

// ParseAsk validates an ask tool's arguments and returns the question. The
// id is the tool call's position, unique in the run.
func ParseAsk(tool, rawArgs, id string, step int32, now time.Time, def Timeouts) (*Wait, error) {
	var a askArgs
	if err := json.Unmarshal([]byte(rawArgs), &a); err != nil {
		return nil, fmt.Errorf("arguments are not a JSON object of the tool's schema: %v", err)
	}
	if a.TimeoutSeconds < 0 || time.Duration(a.TimeoutSeconds)*time.Second > maxInputTimeout {
		return nil, fmt.Errorf("timeout_seconds must be between 1 and %d", int(maxInputTimeout.Seconds()))
	}
	if len(a.Options) > maxInputOptions {
		return nil, fmt.Errorf("at most %d options", maxInputOptions)
	}
	seen := map[string]bool{}
	for i, o := range a.Options {
		l := strings.TrimSpace(o.Label)
		switch {
		case l == "":
			return nil, fmt.Errorf("options[%d].label is empty", i)
		case len(l) > maxOptionLabel:
			return nil, fmt.Errorf("options[%d].label is longer than %d bytes", i, maxOptionLabel)
		case seen[strings.ToLower(l)]:
			return nil, fmt.Errorf("options[%d].label %q is used twice", i, l)
		}
		seen[strings.ToLower(l)] = true
		a.Options[i].Label = l
	}
	timeout := time.Duration(a.TimeoutSeconds) * time.Second
	w := &Wait{ID: id}
	p := &baagentv1.PendingInput{}
	switch tool {
	case ClarificationTool:
		qt, ok := clarificationTypes[a.QuestionType]
		if !ok {
			return nil, fmt.Errorf("question_type must be one of scope, approach, prerequisite, priority")
		}
		if q := strings.TrimSpace(a.Question); q == "" || len(q) > MaxQuestionText {
			return nil, fmt.Errorf("question must be 1-%d bytes", MaxQuestionText)
		}
		if timeout == 0 {
			timeout = def.Clarification
		}
		cq := &baagentv1.ClarificationQuestion{QuestionId: id, QuestionType: qt, Question: strings.TrimSpace(a.Question), Required: a.Required, TimeoutSeconds: int32(timeout.Seconds())}
		for _, o := range a.Options {
			cq.Options = append(cq.Options, &baagentv1.ClarificationOption{Label: o.Label, Description: o.Description, IsRecommended: o.IsRecommended})
		}
		w.Kind = KindClarification
		p.Question = &baagentv1.PendingInput_Clarification{Clarification: cq}
	case DecisionTool:
		dt, ok := decisionTypes[a.DecisionType]
		if !ok {
			return nil, fmt.Errorf("decision_type must be one of branch, method, confirmation, risk, custom")
		}
		if c := strings.TrimSpace(a.Context); c == "" || len(c) > MaxQuestionText {
			return nil, fmt.Errorf("context must be 1-%d bytes", MaxQuestionText)
		}
		if len(a.Options) == 0 && dt != baagentv1.DecisionType_DECISION_TYPE_CUSTOM {
			return nil, fmt.Errorf("options: at least one option is needed (or decision_type custom)")
		}
		if timeout == 0 {
			timeout = def.Decision
		}
		dp := &baagentv1.DecisionPoint{DecisionId: id, DecisionType: dt, StepNumber: step, Context: strings.TrimSpace(a.Context), AllowMultiple: a.AllowMultiple, TimeoutSeconds: int32(timeout.Seconds())}
		for _, o := range a.Options {
			dp.Options = append(dp.Options, &baagentv1.DecisionOption{Label: o.Label, Description: o.Description, EstimatedDurationMs: o.EstimatedDurationMs, ResourceUsage: o.ResourceUsage, IsRecommended: o.IsRecommended})
		}
		w.Kind = KindDecision
		p.Question = &baagentv1.PendingInput_Decision{Decision: dp}
	default:
		return nil, fmt.Errorf("not an ask tool: %s", tool)
	}
	w.Deadline = now.Add(timeout)
	return w.withQuestion(p), nil
}

// SetQuestion stores p (with the wait's deadline) as w's question.
func SetQuestion(w *Wait, p *baagentv1.PendingInput) { w.withQuestion(p) }

// withQuestion stores p (with the deadline) as the wait's question.
func (w *Wait) withQuestion(p *baagentv1.PendingInput) *Wait {
	p.Deadline = timestampOf(w.Deadline)
	w.Question = protoenc.Marshal(p)
	return w
}

// SystemDecision is a decision the platform asks (doom loop, permission).
func SystemDecision(kind, id string, step int32, context string, timeout time.Duration, now time.Time, opts ...*baagentv1.DecisionOption) *Wait {
	w := &Wait{Kind: kind, ID: id, Deadline: now.Add(timeout)}
	return w.withQuestion(&baagentv1.PendingInput{Question: &baagentv1.PendingInput_Decision{Decision: &baagentv1.DecisionPoint{
		DecisionId: id, DecisionType: baagentv1.DecisionType_DECISION_TYPE_CONFIRMATION, StepNumber: step,
		Context: context, Options: opts, TimeoutSeconds: int32(timeout.Seconds()),
	}}})
}

// CheckAnswer validates in against the pending question and returns the
// answer to store.
func CheckAnswer(w *Wait, in *baagentv1.RunInput, now time.Time) (*Answer, error) {
	p := w.Pending()
	ans := &Answer{Text: strings.TrimSpace(in.GetAnswer()), Intervention: int32(in.GetIntervention()), At: now}
	for _, s := range in.GetSelectedOptions() {
		ans.Selected = append(ans.Selected, strings.TrimSpace(s))
	}
	switch q := p.GetQuestion().(type) {
	case *baagentv1.PendingInput_Clarification:
		if len(ans.Selected) > 1 {
			return nil, fmt.Errorf("selected_options: a clarification takes one answer")
		}
		if ans.Text == "" && len(ans.Selected) == 1 {
			ans.Text = ans.Selected[0]
		}
		if ans.Text == "" {
			return nil, fmt.Errorf("answer: empty; choose an option or answer in free text")
		}
		if l := matchLabel(clarLabels(q.Clarification), ans.Text); l != "" {
			ans.Text = l
		}
	case *baagentv1.PendingInput_Decision:
		d := q.Decision
		labels := make([]string, len(d.GetOptions()))
		for i, o := range d.GetOptions() {
			labels[i] = o.GetLabel()
		}
		if w.Kind == KindDoomLoop && ans.Intervention != 0 && ans.Text == "" {
			switch in.GetIntervention() {
			case baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP:
				ans.Text = LabelStop
			case baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CONTINUE:
				ans.Text = LabelContinue
			case baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_CORRECT:
				ans.Text = LabelCorrect
			default:
				return nil, fmt.Errorf("intervention: choose stop, continue or correct")
			}
		}
		if ans.Text == "" && len(ans.Selected) > 0 {
			ans.Text = strings.Join(ans.Selected, ", ")
		} else if len(ans.Selected) == 0 && ans.Text != "" {
			ans.Selected = []string{ans.Text}
		}
		if len(ans.Selected) == 0 {
			return nil, fmt.Errorf("answer: empty; choose one of: %s", strings.Join(labels, ", "))
		}
		if len(ans.Selected) > 1 && !d.GetAllowMultiple() {
			return nil, fmt.Errorf("selected_options: this decision takes one option")
		}
		custom := d.GetDecisionType() == baagentv1.DecisionType_DECISION_TYPE_CUSTOM
		for i, s := range ans.Selected {
			l := matchLabel(labels, s)
			if l == "" && !custom {
				return nil, fmt.Errorf("answer: %q is not an offered option; choose one of: %s", s, strings.Join(labels, ", "))
			}
			if l != "" {
				ans.Selected[i] = l
			}
		}
		ans.Text = strings.Join(ans.Selected, ", ")
	default:
		return nil, fmt.Errorf("the run's question cannot be read")
	}
	return ans, nil
}

func clarLabels(q *baagentv1.ClarificationQuestion) []string {
	out := make([]string, len(q.GetOptions()))
	for i, o := range q.GetOptions() {
		out[i] = o.GetLabel()
	}
	return out
}

// matchLabel returns the label s names (case-insensitively), or "".
func matchLabel(labels []string, s string) string {
	i := slices.IndexFunc(labels, func(l string) bool { return strings.EqualFold(l, strings.TrimSpace(s)) })
	if i < 0 {
		return ""
	}
	return labels[i]
}

// Recommended returns the recommended option's label of the question, or
// "" when none is marked.
func Recommended(p *baagentv1.PendingInput) string {
	if c := p.GetClarification(); c != nil {
		for _, o := range c.GetOptions() {
			if o.GetIsRecommended() {
				return o.GetLabel()
			}
		}
	}
	for _, o := range p.GetDecision().GetOptions() {
		if o.GetIsRecommended() {
			return o.GetLabel()
		}
	}
	return ""
}

func timestampOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
