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
	TaskType    string
	EntityTypes []string // sorted, unique
}

// DecisionPreference is what users chose at one decision point of a
// pattern, counted over its uses.
type DecisionPreference struct {
	Question    string
	Recommended string         // the option the pattern recommends now
	Choices     map[string]int // option → times users chose it
}

// Step is a critical step of a pattern.
type Step struct {
	Description    string
	Tools          []string
	ExpectedOutput string
	// Corrections are fixes users made at this step, newest last (at most
	// MaxCorrectionsPerStep).
	Corrections []string
}

// SuccessFactors are what made the pattern's runs succeed.
type SuccessFactors struct {
	ClarificationsNeeded int
	CriticalDecisions    []string // questions of high-impact decisions
	CommonCorrections    []string // at most MaxCommonCorrections, newest last
}

// Pattern is an interaction pattern: a reusable way of doing one kind of
// task, learned from successful traces.
type Pattern struct {
	ID          string
	Tenant      string
	Name        string
	Description string
	Signature   Signature
	// Entities are the (lower-cased) entity names the pattern's traces
	// involved, at most MaxEntities.
	Entities       []string
	Steps          []Step
	ToolChains     [][]string // best first, at most MaxToolChains
	Decisions      []DecisionPreference
	SuccessFactors SuccessFactors

	UsageCount          int
	SuccessCount        int
	FailureCount        int
	ConsecutiveFailures int
	// SuccessRate is SuccessCount/UsageCount, reduced by DecayFactor when an
	// outcome arrives after DecayAfter without one.
	SuccessRate   float64
	AvgDurationMs int64

	CreatedAt     time.Time
	UpdatedAt     time.Time // last outcome or edit
	LastQueriedAt time.Time // last time retrieval considered it
	LastUsedAt    time.Time // last time it was reused or referenced
}

// ClarificationQA is a question the agent asked and the user's answer.
type ClarificationQA struct {
	Question, Answer string
}

// Decision is a decision point of a run.
type Decision struct {
	Question    string
	Options     []string
	Recommended string
	UserChoice  string
	// Impact is "high", "medium" or "low".
	Impact string
}

// PlanStep is a step of a run's work plan.
type PlanStep struct {
	Description    string
	Tools          []string
	ExpectedOutput string
	Done           bool
}

// ToolCall is one tool call of a run, in order.
type ToolCall struct {
	Tool    string
	Success bool
	// PlanStep is the 1-based plan step it belongs to; 0 when the run had
	// no plan.
	PlanStep int
}

// Correction is an agent error and the human fix for it.
type Correction struct {
	// PlanStep is the 1-based plan step it happened in; 0 when unknown.
	PlanStep   int
	AgentError string
	HumanFix   string
	// Tools are the tools the fix used instead, when it changed them.
	Tools []string
}

// Trace is the interaction trace of one conversation's task.
type Trace struct {
	ConversationID string
	RunID          string
	UserGoal       string
	Clarifications []ClarificationQA
	Decisions      []Decision
	PlanSteps      []PlanStep
	ToolCalls      []ToolCall
	Corrections    []Correction
	FinalResult    string
	Success        bool
	DurationMs     int64
	// HumanInterventions counts answers to questions, decisions and
	// permissions and corrections.
	HumanInterventions int
	// EntityTypes and Entities are the entities the goal involves (from
	// the tenant's memory or the run's tools).
	EntityTypes []string
	Entities    []string
}
