package orchestrator

import (
	"flag"
	"fmt"
	"time"

	"github.com/baagent/baagent/services/orchestrator/internal/budget"
)

// Settings holds the orchestrator's settings: how many runs it takes on,
// delegation to sub-agents, how long a run waits for the user, and how
// patiently it calls the model.
type Settings struct {
	// MaxConcurrentRuns, MaxQueuedRuns and MaxRunsPerTenant bound runs
	// executing on one replica, runs queued or in progress overall, and
	// per tenant.
	MaxConcurrentRuns int
	MaxQueuedRuns     int
	MaxRunsPerTenant  int
	// SubAgentsDir holds the sub-agent definitions the `task` tool offers
	// (none when empty or missing); SubAgentMaxDepth and SubAgentTimeout
	// bound delegation through it.
	SubAgentsDir     string
	SubAgentMaxDepth int
	SubAgentTimeout  time.Duration
	// ClarificationTimeout and DecisionTimeout are how long a run waits
	// for the user before it takes the recommended option.
	ClarificationTimeout time.Duration
	DecisionTimeout      time.Duration
	// ModelFirstByteTimeout and ModelIdleTimeout bound a stalled model
	// stream per attempt; ModelMaxAttempts bounds the attempts of one
	// model call (429, 5xx, timeouts and broken streams are retried).
	ModelFirstByteTimeout time.Duration
	ModelIdleTimeout      time.Duration
	ModelMaxAttempts      int
	// SkillTriggers is what a user message asking for a skill does
	// before the first model call: activate, suggest or off.
	SkillTriggers string
	// PlanStepMaxIterations, PlanApproval and ComplexityClassifier
	// configure planning (see Options).
	PlanStepMaxIterations int
	PlanApproval          bool
	ComplexityClassifier  string
	// BudgetsFile holds per-tenant and per-API-key budgets (checked at
	// startup); BudgetReservationTTL is how long an unsettled model call's
	// reservation counts.
	BudgetsFile          string
	BudgetReservationTTL time.Duration
}

// RegisterFlags registers the settings on fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&s.MaxConcurrentRuns, "max-concurrent-runs", 64, "runs one orchestrator replica executes at once")
	fs.IntVar(&s.MaxQueuedRuns, "max-queued-runs", 1024, "runs queued or in progress over all replicas and tenants; StartRun beyond is refused (ResourceExhausted)")
	fs.IntVar(&s.MaxRunsPerTenant, "max-runs-per-tenant", 32, "runs one tenant may have queued or in progress; StartRun beyond is refused (ResourceExhausted)")
	fs.StringVar(&s.SubAgentsDir, "subagents-dir", "examples/agents", "sub-agent definitions (*.yaml) offered through the task tool; empty or missing: none")
	fs.IntVar(&s.SubAgentMaxDepth, "subagent-max-depth", 1, "delegation depth through the task tool (1: sub-agents never delegate further; at most 4)")
	fs.DurationVar(&s.SubAgentTimeout, "subagent-timeout", 30*time.Minute, "how long a task call waits for its sub-agent run before cancelling it")
	fs.DurationVar(&s.ClarificationTimeout, "clarification-timeout", 60*time.Second, "how long a run waits for a clarification answer before taking the recommended option")
	fs.DurationVar(&s.DecisionTimeout, "decision-timeout", 300*time.Second, "how long a run waits for a decision (also doom-loop and tool-approval questions) before its default")
	fs.DurationVar(&s.ModelFirstByteTimeout, "model-first-byte-timeout", 120*time.Second, "how long one model attempt may wait for its first streamed chunk")
	fs.DurationVar(&s.ModelIdleTimeout, "model-idle-timeout", 60*time.Second, "how long a model stream may stay silent between two chunks")
	fs.StringVar(&s.SkillTriggers, "skill-triggers", SkillTriggersActivate, "what a user message naming a skill (/skill-name) or matching a skill's triggers does before the first model call: activate (the skill), suggest (a note to the model; /skill-name still activates) or off")
	fs.IntVar(&s.PlanStepMaxIterations, "plan-step-max-iterations", DefaultPlanStepMaxIterations, "ReAct iterations one work-plan step may take before it is marked failed and the run moves on (1-100)")
	fs.BoolVar(&s.PlanApproval, "plan-approval", false, "ask the user to approve (or edit, or cancel) a work plan before it runs, unless the run says otherwise (RunSpec.plan_approval)")
	fs.StringVar(&s.ComplexityClassifier, "complexity-classifier", ComplexityRules, "how a request's complexity is judged: rules, or model (one short model call; the rules on any error)")
	fs.IntVar(&s.ModelMaxAttempts, "model-max-attempts", 4, "attempts of one model call, the first included (1-10; 429, 5xx, timeouts and broken streams are retried)")
	fs.StringVar(&s.BudgetsFile, "budgets-file", "", "YAML file of per-tenant and per-API-key budgets (USD per day and month, tokens per day, steps and USD per run); budgets set through the admin API replace its entries; empty: admin API only")
	fs.DurationVar(&s.BudgetReservationTTL, "budget-reservation-ttl", budget.DefaultReservationTTL, "how long a model call's worst-case cost stays reserved in the usage ledger when it is never settled (its replica crashed)")
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	switch {
	case s.ModelFirstByteTimeout <= 0:
		return fmt.Errorf("setting model-first-byte-timeout: must be positive, got %s", s.ModelFirstByteTimeout)
	case s.ModelIdleTimeout <= 0:
		return fmt.Errorf("setting model-idle-timeout: must be positive, got %s", s.ModelIdleTimeout)
	case s.ModelMaxAttempts < 1 || s.ModelMaxAttempts > 10:
		return fmt.Errorf("setting model-max-attempts: want 1 to 10, got %d", s.ModelMaxAttempts)
	case s.MaxConcurrentRuns < 1 || s.MaxConcurrentRuns > 10000:
		return fmt.Errorf("setting max-concurrent-runs: want 1 to 10000, got %d", s.MaxConcurrentRuns)
	case s.MaxQueuedRuns < 1 || s.MaxQueuedRuns > 1000000:
		return fmt.Errorf("setting max-queued-runs: want 1 to 1000000, got %d", s.MaxQueuedRuns)
	case s.MaxRunsPerTenant < 1 || s.MaxRunsPerTenant > s.MaxQueuedRuns:
		return fmt.Errorf("setting max-runs-per-tenant: want 1 to max-queued-runs (%d), got %d", s.MaxQueuedRuns, s.MaxRunsPerTenant)
	case s.SubAgentMaxDepth < 1 || s.SubAgentMaxDepth > MaxSubAgentDepth:
		return fmt.Errorf("setting subagent-max-depth: want 1 to 4 (no sub-agents: empty -subagents-dir), got %d", s.SubAgentMaxDepth)
	case s.SubAgentTimeout <= 0:
		return fmt.Errorf("setting subagent-timeout: must be positive, got %s", s.SubAgentTimeout)
	case s.ClarificationTimeout <= 0:
		return fmt.Errorf("setting clarification-timeout: must be positive, got %s", s.ClarificationTimeout)
	case s.DecisionTimeout <= 0:
		return fmt.Errorf("setting decision-timeout: must be positive, got %s", s.DecisionTimeout)
	case s.PlanStepMaxIterations < 1 || s.PlanStepMaxIterations > 100:
		return fmt.Errorf("setting plan-step-max-iterations: want 1 to 100, got %d", s.PlanStepMaxIterations)
	case s.ComplexityClassifier != ComplexityRules && s.ComplexityClassifier != ComplexityModel:
		return fmt.Errorf("setting complexity-classifier: want rules or model, got %q", s.ComplexityClassifier)
	}
	if err := checkSkillTriggers(s.SkillTriggers); err != nil {
		return fmt.Errorf("setting skill-triggers: %w", err)
	}
	if s.BudgetReservationTTL < time.Minute || s.BudgetReservationTTL > 24*time.Hour {
		return fmt.Errorf("setting budget-reservation-ttl: want 1m to 24h, got %s", s.BudgetReservationTTL)
	}
	if _, err := budget.LoadFile(s.BudgetsFile); err != nil {
		return fmt.Errorf("setting budgets-file: %w", err)
	}
	return nil
}

// Options returns the service options the settings select; the caller
// adds the runtime dependencies (logger, registerer, JetStream, peers,
// the model client built with the Model* settings, tracer).
func (s *Settings) Options() Options {
	return Options{
		SubAgentsDir:         s.SubAgentsDir,
		SubAgentMaxDepth:     s.SubAgentMaxDepth,
		MaxConcurrentRuns:    s.MaxConcurrentRuns,
		MaxQueuedRuns:        s.MaxQueuedRuns,
		MaxRunsPerTenant:     s.MaxRunsPerTenant,
		SubAgentTimeout:      s.SubAgentTimeout,
		ClarificationTimeout: s.ClarificationTimeout,
		DecisionTimeout:      s.DecisionTimeout,
		SkillTriggers:        s.SkillTriggers,

		PlanStepMaxIterations: s.PlanStepMaxIterations,
		PlanApproval:          s.PlanApproval,
		ComplexityClassifier:  s.ComplexityClassifier,

		BudgetsFile:          s.BudgetsFile,
		BudgetReservationTTL: s.BudgetReservationTTL,
	}
}
