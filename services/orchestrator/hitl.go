package orchestrator

import (
	"time"

	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// Human in the loop (docs/concepts/runs.md): the built-in tools ask_clarification
// and ask_decision, the doom-loop intervention and the approval of tools
// whose permission is ASK all pause the run on a question. A paused run
// is WAITING_INPUT: its checkpoint holds the question, no goroutine waits,
// and its work item returns to the queue at the question's deadline. An
// answer (SubmitInput) is stored in the checkpoint and the run is
// requeued at once; at the deadline without one the run goes on with the
// recommended option (or, for a doom loop, stops), and says so.

// The built-in ask tools' names.
const (
	AskClarificationTool = hitl.ClarificationTool
	AskDecisionTool      = hitl.DecisionTool
)

// Default waits: 60 s for clarifications, 300 s for decisions.
const (
	DefaultClarificationTimeout = 60 * time.Second
	DefaultDecisionTimeout      = 300 * time.Second
)
