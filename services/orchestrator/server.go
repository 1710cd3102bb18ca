// Package orchestrator is the OrchestratorService: it accepts runs and drives
// the ReAct loop for a tenant — context window from the context service,
// model call, tool calls through the toolrunner (in parallel, with the
// model's tool_call_id), skills through the `skill` meta-tool — until a final
// answer, max_steps, cancellation or a fatal error. Every step is published
// as events on NATS JetStream (baagent.<tenant>.run.<run_id>.events) with a
// contiguous per-run seq and exactly one terminal event; run records live in
// the JetStream KV bucket natsx.BucketRuns.
//
// The orchestrator reaches its peers only through their gRPC contracts; a
// peer that answers Unimplemented or is unavailable ends the run with a
// clear `error` event.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcserver"
	"github.com/baagent/baagent/internal/lru"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/convindex"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
	"github.com/baagent/baagent/services/orchestrator/internal/skillstack"
	"github.com/baagent/baagent/services/orchestrator/internal/subagent"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.OrchestratorService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.OrchestratorService"

// Limits and defaults.
const (
	// MaxPageSize is the largest ListRuns page (the contract's maximum).
	MaxPageSize = 500
	// DefaultPageSize is the ListRuns page size when none is given.
	DefaultPageSize = 50
	// DefaultMaxSteps is the step limit of a run that sets none.
	DefaultMaxSteps = 50
	// DefaultMaxConcurrentRuns bounds the runs executing at once on a
	// replica.
	DefaultMaxConcurrentRuns = 64
	// DefaultMaxQueuedRuns bounds the runs in the shared run queue (queued
	// or in progress, all tenants).
	DefaultMaxQueuedRuns = 1024
	// DefaultCatalogTokenBudget bounds the level-1 skills catalog.
	DefaultCatalogTokenBudget = 2000
	// DefaultCancelWait is how long CancelRun waits for the run to stop.
	DefaultCancelWait = 5 * time.Second
	// finalizeTimeout bounds publishing the terminal event and saving the
	// final record after the run's own context has ended.
	finalizeTimeout = 10 * time.Second
)

// Options configures a [Server]. JetStream, Model and the four peer clients
// are required; without them the RPCs answer Unavailable naming what is
// missing.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the Prometheus collectors (baagent_orchestrator_*);
	// nil registers none.
	Registerer prometheus.Registerer

	// JetStream publishes run events and holds run records; the streams and
	// buckets must be provisioned (natsx.Provision).
	JetStream jetstream.JetStream

	// Peers, by their gRPC contracts.
	Context    baagentv1.ContextServiceClient
	Skills     baagentv1.SkillsServiceClient
	ToolRunner baagentv1.ToolRunnerServiceClient
	Tokens     baagentv1.TokensServiceClient
	// Memory, when set, is the memory service: completed top-level runs
	// are queued on the capture stream to become episodes, and deleting a
	// conversation deletes its episodes (docs/concepts/memory.md); a
	// top-level run is matched against the tenant's interaction patterns
	// when it starts and its trace is queued when it ends
	// (docs/concepts/patterns.md). Nil: runs are not remembered.
	Memory baagentv1.MemoryServiceClient

	// Model answers the model calls.
	Model Model
	// ScriptedModel says that Model is the built-in scripted model; the run
	// records and `start` events say so.
	ScriptedModel bool
	// DefaultModel is the model of runs that name none; required.
	DefaultModel string

	// MaxMsgBytes is the largest gRPC message the server may send (the
	// process's -max-msg-bytes; default grpcserver.DefaultMaxMsgBytes).
	// ListRuns ends a page early rather than exceed it.
	MaxMsgBytes int

	// SystemPrompt replaces DefaultSystemPrompt when set.
	SystemPrompt string
	// DefaultMaxSteps is the step limit of runs that set none (default 50).
	DefaultMaxSteps int
	// MaxConcurrentRuns bounds the runs executing at once on this replica
	// (default 64): the number of run-queue workers.
	MaxConcurrentRuns int
	// MaxQueuedRuns bounds the runs in the shared run queue, queued or in
	// progress on any replica (default 1024); StartRun beyond it answers
	// ResourceExhausted.
	MaxQueuedRuns int
	// MaxRunsPerTenant bounds one tenant's runs queued or in progress on
	// any replica (default 32); StartRun beyond it answers
	// ResourceExhausted.
	MaxRunsPerTenant int
	// RunAckWait is how long a run stays with a replica that stopped
	// heartbeating before another replica takes it over (default 6 s).
	RunAckWait time.Duration
	// CatalogTokenBudget bounds the skills catalog in tokens (default 2000).
	CatalogTokenBudget int64
	// Replica names this process in `start` events and checkpoints
	// (default: <host name>-<pid>).
	Replica string

	// ClarificationTimeout and DecisionTimeout are how long a question
	// waits for the user when the model sets no timeout_seconds (defaults
	// 60 s and 300 s); DecisionTimeout is also the wait of the
	// platform's own decisions (doom loop, tool approval).
	ClarificationTimeout time.Duration
	DecisionTimeout      time.Duration

	// Planning (docs/concepts/planning.md). PlanStepMaxIterations bounds
	// the ReAct iterations of one plan step (default 8); PlanApproval asks
	// the user to approve a plan before it runs, unless the run says
	// otherwise; ComplexityClassifier is "rules" (default) or "model" (one
	// short model call, the rules on any error).
	PlanStepMaxIterations int
	PlanApproval          bool
	ComplexityClassifier  string

	// SubAgentsDir holds the sub-agent definition files (*.yaml, see
	// LoadSubAgents) offered through the `task` tool. Empty, or a
	// directory that does not exist: no sub-agents, no `task` tool. A
	// definition that does not load makes the orchestrator refuse runs
	// with the reason (as a missing option does).
	SubAgentsDir string
	// SubAgentMaxDepth bounds delegation: a run at this depth (a top-level
	// run is depth 0) is not offered the `task` tool (default 1: sub-agents
	// never delegate further, even when their definition lists `task`).
	SubAgentMaxDepth int
	// SubAgentTimeout bounds how long a `task` call waits for its sub-agent
	// run; past it the child is cancelled and the call fails (default 30
	// minutes).
	SubAgentTimeout time.Duration

	// SkillTriggers is what a user message that asks for a skill (a
	// `/skill-name` or one of a skill's trigger phrases) does before the
	// run's first model call: SkillTriggersActivate (the default when
	// empty), SkillTriggersSuggest or SkillTriggersOff.
	SkillTriggers string

	// TracerProvider traces runs: one span per execution, its steps, model
	// and tool calls, context windows and skill activations (see
	// trace.go). Nil or a no-op provider: nothing is traced.
	TracerProvider trace.TracerProvider

	// BudgetsFile is the budgets file (docs/concepts/budgets.md); empty:
	// budgets come from the admin API only. A file that does not load
	// makes the orchestrator refuse runs with the reason.
	BudgetsFile string
	// BudgetReservationTTL is how long a model call's reservation counts
	// when it is never settled (default 15 minutes).
	BudgetReservationTTL time.Duration
	// BudgetCacheTTL is how long a budget read is cached (default 2 s;
	// negative: not cached).
	BudgetCacheTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SystemPrompt == "" {
		o.SystemPrompt = DefaultSystemPrompt
	}
	if o.MaxMsgBytes <= 0 {
		o.MaxMsgBytes = grpcserver.DefaultMaxMsgBytes
	}
	if o.DefaultMaxSteps <= 0 {
		o.DefaultMaxSteps = DefaultMaxSteps
	}
	if o.MaxConcurrentRuns <= 0 {
		o.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if o.MaxQueuedRuns <= 0 {
		o.MaxQueuedRuns = DefaultMaxQueuedRuns
	}
	if o.MaxRunsPerTenant <= 0 {
		o.MaxRunsPerTenant = DefaultMaxRunsPerTenant
	}
	if o.RunAckWait <= 0 {
		o.RunAckWait = DefaultRunAckWait
	}
	if o.CatalogTokenBudget <= 0 {
		o.CatalogTokenBudget = DefaultCatalogTokenBudget
	}
	if o.ClarificationTimeout <= 0 {
		o.ClarificationTimeout = DefaultClarificationTimeout
	}
	if o.DecisionTimeout <= 0 {
		o.DecisionTimeout = DefaultDecisionTimeout
	}
	if o.PlanStepMaxIterations <= 0 {
		o.PlanStepMaxIterations = DefaultPlanStepMaxIterations
	}
	if o.ComplexityClassifier == "" {
		o.ComplexityClassifier = ComplexityRules
	}
	if o.SubAgentMaxDepth <= 0 {
		o.SubAgentMaxDepth = DefaultSubAgentMaxDepth
	}
	if o.SubAgentTimeout <= 0 {
		o.SubAgentTimeout = DefaultSubAgentTimeout
	}
	if o.SkillTriggers == "" {
		o.SkillTriggers = SkillTriggersActivate
	}
	if o.Replica == "" {
		// Host and process: unique even for replicas on one host.
		host, _ := os.Hostname()
		o.Replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return o
}

// missing names the required options that are not set.
func (o Options) missing() error {
	var errs []error
	for _, m := range []struct {
		name string
		set  bool
	}{
		{"JetStream", o.JetStream != nil},
		{"Model", o.Model != nil},
		{"Context", o.Context != nil},
		{"Skills", o.Skills != nil},
		{"ToolRunner", o.ToolRunner != nil},
		{"Tokens", o.Tokens != nil},
		{"DefaultModel", o.DefaultModel != ""},
	} {
		if !m.set {
			errs = append(errs, fmt.Errorf("Options.%s is not set", m.name)) //nolint:staticcheck // names the Go field
		}
	}
	if err := checkSkillTriggers(o.SkillTriggers); o.SkillTriggers != "" && err != nil {
		errs = append(errs, fmt.Errorf("Options.SkillTriggers: %w", err)) //nolint:staticcheck // names the Go field
	}
	return errors.Join(errs...)
}

// Server implements baagentv1.OrchestratorServiceServer. Runs execute on
// the run-queue workers owned by [Server.Run].
type Server struct {
	baagentv1.UnimplementedOrchestratorServiceServer

	opts      Options
	log       *slog.Logger
	tracer    trace.Tracer  // nil without tracing
	agents    *subagent.Set // the sub-agent definitions; empty without any
	metrics   *metrics
	configErr error // why the server cannot run runs, if it cannot

	storeMu sync.Mutex
	store   *runstore.Store   // opened on first use
	cps     *checkpoint.Store // opened on first use
	stacks  *skillstack.Store // opened on first use
	convs   *convindex.Store  // opened on first use

	// backfilled remembers the tenants whose conversation index was
	// backfilled from their run records.
	backfilled *lru.Cache[string, struct{}]

	// noTriggers records that the skills service answered MatchTriggers
	// Unimplemented, which is logged once.
	noTriggers atomic.Bool

	// base is the parent context of every run; cancelled (cause
	// errShutdown) when Run stops.
	base     context.Context
	stopRuns context.CancelCauseFunc

	mu      sync.Mutex
	runs    map[string]*run // executing on this replica
	closing bool

	budget *budgets // budgets and the usage ledger (budgets.go)
}

var _ baagentv1.OrchestratorServiceServer = (*Server)(nil)

// errShutdown is the cancellation cause of runs stopped by shutdown.
var errShutdown = errors.New("the orchestrator is shutting down")

// New returns a Server configured by opts. It never fails: missing
// required options and a metrics registration conflict are logged and make
// the RPCs answer Unavailable with the reason, so the process still serves
// health and the other services.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts: opts,
		log:  opts.Logger.With("service", ServiceName),
		runs: map[string]*run{},

		backfilled: lru.New[string, struct{}](lru.Options{MaxEntries: backfillCacheSize}),
	}
	s.base, s.stopRuns = context.WithCancelCause(context.Background())
	if tracing.Enabled(opts.TracerProvider) {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		s.log.Error("orchestrator metrics not registered", "error", err)
		m, _ = newMetrics(nil)
	}
	s.metrics = m
	agents, err := subagent.LoadDir(opts.SubAgentsDir)
	if err != nil {
		s.log.Error("sub-agent definitions not loaded", "dir", opts.SubAgentsDir, "error", err)
		agents = subagent.NewSet(nil)
	}
	s.agents = agents
	if err == nil && len(agents.All()) > 0 {
		s.log.Info("sub-agents loaded", "dir", opts.SubAgentsDir, "names", agents.Names())
	}
	if err := errors.Join(opts.missing(), err, s.initBudgets()); err != nil {
		s.configErr = err
		s.log.Error("orchestrator is not configured; runs are refused", "error", err)
	} else if opts.ScriptedModel {
		s.log.Info("orchestrator uses the built-in scripted model (no model endpoint configured)", "model", opts.DefaultModel)
	}
	return s
}

// Register registers the OrchestratorService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterOrchestratorServiceServer(gs, s)
}

// Run pulls runs from the shared run queue on MaxConcurrentRuns workers and
// executes them until ctx is done. On shutdown it stops the runs in
// progress at their next checkpoint boundary and hands them back to the
// queue (another replica, or this one restarted, resumes them), and
// returns nil.
func (s *Server) Run(ctx context.Context) error {
	if s.configErr != nil {
		<-ctx.Done()
		return nil
	}
	var cons jetstream.Consumer
	for {
		c, err := s.ensureConsumer(ctx)
		if err == nil {
			cons = c
			break
		}
		s.log.Warn("run queue consumer unavailable; retrying", "error", err)
		if !retry.Sleep(ctx, time.Second) {
			return nil
		}
	}
	stopControl, err := s.listenControl()
	if err != nil {
		s.log.Error("cross-replica cancellation unavailable", "error", err)
	}
	work, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range s.opts.MaxConcurrentRuns {
		wg.Go(func() { s.consume(work, cons) })
	}
	<-ctx.Done()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	stopWork()
	s.stopRuns(errShutdown)
	wg.Wait()
	if stopControl != nil {
		stopControl()
	}
	return nil
}

// runStore returns the run store, opening the KV bucket on first use (a
// failure is retried by the next call: the bucket may be provisioned later).
func (s *Server) runStore(ctx context.Context) (*runstore.Store, error) {
	if s.configErr != nil {
		return nil, status.Errorf(codes.Unavailable, "orchestrator is not configured: %v", s.configErr)
	}
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.store == nil {
		kv, err := s.opts.JetStream.KeyValue(ctx, natsx.BucketRuns)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "run store unavailable: open KV bucket %s (is JetStream provisioned?): %v", natsx.BucketRuns, err)
		}
		s.store = runstore.New(kv)
	}
	return s.store, nil
}

// checkpoints returns the checkpoint store, opening the KV bucket on first
// use.
func (s *Server) checkpoints(ctx context.Context) (*checkpoint.Store, error) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.cps == nil {
		kv, err := s.opts.JetStream.KeyValue(ctx, natsx.BucketCheckpoints)
		if err != nil {
			return nil, fmt.Errorf("open KV bucket %s (is JetStream provisioned?): %w", natsx.BucketCheckpoints, err)
		}
		s.cps = checkpoint.NewStore(kv)
	}
	return s.cps, nil
}

// skillStacks opens the store of conversations' skill stacks, kept in the
// checkpoint bucket.
func (s *Server) skillStacks(ctx context.Context) (*skillstack.Store, error) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if s.stacks == nil {
		kv, err := s.opts.JetStream.KeyValue(ctx, natsx.BucketCheckpoints)
		if err != nil {
			return nil, fmt.Errorf("open KV bucket %s (is JetStream provisioned?): %w", natsx.BucketCheckpoints, err)
		}
		s.stacks = skillstack.NewStore(kv)
	}
	return s.stacks, nil
}

// local returns the run if it was accepted by this replica and has not
// finished.
func (s *Server) local(runID string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[runID]
}

func (s *Server) forget(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, runID)
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}
