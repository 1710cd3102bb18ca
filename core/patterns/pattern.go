package patterns

import "time"

// State is where a pattern stands with respect to the quality gates.
type State int

// Pattern states. Only Active patterns are offered to a run.
const (
	// StateCandidate is learning: not yet enough successes, success rate
	// or recent queries to be offered.
	StateCandidate State = iota + 1
	// StateActive passed the admission gates and may be offered.
	StateActive
	// StateDraft fell below DraftBelowRate: not offered until it recovers.
	StateDraft
	// StateUntrusted failed more than UntrustedAfterFailures times in a
	// row: not offered until it succeeds again.
	StateUntrusted
	// StateArchived was not used for ArchiveAfter: not offered.
	StateArchived
)

var stateNames = [...]string{"", "candidate", "active", "draft", "untrusted", "archived"}

func (s State) String() string {
	if s < 1 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// Signature identifies the kind of task a pattern solves: the task type
// and the entity types involved.
type Signature struct {
	TaskType    string   `json:"task_type,omitempty"`
	EntityTypes []string `json:"entity_types,omitempty"` // sorted, unique
}

// DecisionPreference is what users chose at one decision point of a
// pattern, counted over its uses.
type DecisionPreference struct {
	Question    string         `json:"question,omitempty"`
	Recommended string         `json:"recommended,omitempty"` // the option the pattern recommends now
	Choices     map[string]int `json:"choices,omitempty"`     // option → times users chose it
}

// Step is a critical step of a pattern.
type Step struct {
	Description    string   `json:"description,omitempty"`
	Tools          []string `json:"tools,omitempty"`
	ExpectedOutput string   `json:"expected_output,omitempty"`
	// Corrections are fixes users made at this step, newest last (at most
	// MaxCorrectionsPerStep).
	Corrections []string `json:"corrections,omitempty"`
}

// SuccessFactors are what made the pattern's runs succeed.
type SuccessFactors struct {
	ClarificationsNeeded int      `json:"clarifications_needed,omitempty"`
	CriticalDecisions    []string `json:"critical_decisions,omitempty"` // questions of high-impact decisions
	CommonCorrections    []string `json:"common_corrections,omitempty"` // at most MaxCommonCorrections, newest last
}

// Pattern is an interaction pattern: a reusable way of doing one kind of
// task, learned from successful traces.
type Pattern struct {
	ID          string    `json:"id,omitempty"`
	Tenant      string    `json:"tenant,omitempty"`
	Name        string    `json:"name,omitempty"`
	Description string    `json:"description,omitempty"`
	Signature   Signature `json:"signature"`
	// Entities are the (lower-cased) entity names the pattern's traces
	// involved, at most MaxEntities.
	Entities       []string             `json:"entities,omitempty"`
	Steps          []Step               `json:"steps,omitempty"`
	ToolChains     [][]string           `json:"tool_chains,omitempty"` // best first, at most MaxToolChains
	Decisions      []DecisionPreference `json:"decisions,omitempty"`
	SuccessFactors SuccessFactors       `json:"success_factors"`

	UsageCount          int `json:"usage_count,omitempty"`
	SuccessCount        int `json:"success_count,omitempty"`
	FailureCount        int `json:"failure_count,omitempty"`
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// SuccessRate is SuccessCount/UsageCount, reduced by DecayFactor when an
	// outcome arrives after DecayAfter without one.
	SuccessRate   float64 `json:"success_rate,omitempty"`
	AvgDurationMs int64   `json:"avg_duration_ms,omitempty"`

	CreatedAt     time.Time `json:"created_at,omitzero"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`      // last outcome or edit
	LastQueriedAt time.Time `json:"last_queried_at,omitzero"` // last time retrieval considered it
	LastUsedAt    time.Time `json:"last_used_at,omitzero"`    // last time it was reused or referenced
}

// ClarificationQA is a question the agent asked and the user's answer.
type ClarificationQA struct {
	Question string `json:"question,omitempty"`
	Answer   string `json:"answer,omitempty"`
}

// Decision is a decision point of a run.
type Decision struct {
	Question    string   `json:"question,omitempty"`
	Options     []string `json:"options,omitempty"`
	Recommended string   `json:"recommended,omitempty"`
	UserChoice  string   `json:"user_choice,omitempty"`
	// Impact is "high", "medium" or "low".
	Impact string `json:"impact,omitempty"`
}

// PlanStep is a step of a run's work plan.
type PlanStep struct {
	Description    string   `json:"description,omitempty"`
	Tools          []string `json:"tools,omitempty"`
	ExpectedOutput string   `json:"expected_output,omitempty"`
	Done           bool     `json:"done,omitempty"`
}

// ToolCall is one tool call of a run, in order.
type ToolCall struct {
	Tool    string `json:"tool,omitempty"`
	Success bool   `json:"success,omitempty"`
	// PlanStep is the 1-based plan step it belongs to; 0 when the run had
	// no plan.
	PlanStep int `json:"plan_step,omitempty"`
}

// Correction is an agent error and the human fix for it.
type Correction struct {
	// PlanStep is the 1-based plan step it happened in; 0 when unknown.
	PlanStep   int    `json:"plan_step,omitempty"`
	AgentError string `json:"agent_error,omitempty"`
	HumanFix   string `json:"human_fix,omitempty"`
	// Tools are the tools the fix used instead, when it changed them.
	Tools []string `json:"tools,omitempty"`
}

// Trace is the interaction trace of one conversation's task.
type Trace struct {
	ConversationID string            `json:"conversation_id,omitempty"`
	RunID          string            `json:"run_id,omitempty"`
	UserGoal       string            `json:"user_goal,omitempty"`
	Clarifications []ClarificationQA `json:"clarifications,omitempty"`
	Decisions      []Decision        `json:"decisions,omitempty"`
	PlanSteps      []PlanStep        `json:"plan_steps,omitempty"`
	ToolCalls      []ToolCall        `json:"tool_calls,omitempty"`
	Corrections    []Correction      `json:"corrections,omitempty"`
	FinalResult    string            `json:"final_result,omitempty"`
	Success        bool              `json:"success,omitempty"`
	DurationMs     int64             `json:"duration_ms,omitempty"`
	// HumanInterventions counts answers to questions, decisions and
	// permissions and corrections.
	HumanInterventions int `json:"human_interventions,omitempty"`
	// EntityTypes and Entities are the entities the goal involves (from
	// the tenant's memory or the run's tools).
	EntityTypes []string `json:"entity_types,omitempty"`
	Entities    []string `json:"entities,omitempty"`
}
