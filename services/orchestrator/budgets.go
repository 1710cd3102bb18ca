package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baagent/baagent/core/pricing"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	basemetrics "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/budget"
)

// Budgets (docs/concepts/budgets.md). StartRun refuses a run whose tenant
// (or API key) has reached a limit; a running run checks the limits at
// every step boundary and reserves each model call's worst-case cost in
// the shared usage ledger before making it, so that replicas racing for
// the last dollar cannot overspend; the reservation is settled to the
// cost `account` computes once the call returns.

// Codes of a run stopped by its budget.
const (
	// CodeBudgetExceeded: a limit of the run, its tenant or its API key
	// was reached; the message names it.
	CodeBudgetExceeded = "BUDGET_EXCEEDED"
	// CodeBudgetUnavailable: the run has day or month limits, and the
	// usage ledger could not be read or written to enforce them.
	CodeBudgetUnavailable = "BUDGET_UNAVAILABLE"
)

// reasonBudgetExceeded is the ErrorInfo reason of a refused StartRun.
const reasonBudgetExceeded = "BUDGET_EXCEEDED"

// budgets is the server's budget state: the file's budgets, the stores
// opened on first use, and the metrics.
type budgets struct {
	file    *budget.File
	ttl     time.Duration // reservation TTL
	cache   time.Duration // budget cache TTL
	metrics *budgetMetrics

	mu     sync.Mutex
	store  *budget.Store
	ledger *budget.Ledger
}

type budgetMetrics struct {
	refusals  *prometheus.CounterVec // by limit
	stops     *prometheus.CounterVec // by limit
	conflicts prometheus.Counter
	errors    *prometheus.CounterVec // by op
	reserved  prometheus.Gauge
}

// Operations of the ledger, the op label of budget_ledger_errors_total.
const (
	ledgerReserve = "reserve"
	ledgerSettle  = "settle"
	ledgerCheck   = "check"
)

func newBudgetMetrics(reg prometheus.Registerer) (*budgetMetrics, error) {
	const ns, sub = "baagent", "orchestrator"
	m := &budgetMetrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "budget_refusals_total",
			Help: "StartRun calls refused because a budget limit was reached, by limit.",
		}, []string{"limit"}),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "budget_stops_total",
			Help: "Runs stopped mid-run (BUDGET_EXCEEDED) because a budget limit was reached, by limit.",
		}, []string{"limit"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "budget_ledger_conflicts_total",
			Help: "Usage ledger updates retried because another writer changed the entry first.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "budget_ledger_errors_total",
			Help: "Usage ledger operations that failed, by op (reserve, settle, check).",
		}, []string{"op"}),
		reserved: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "budget_reservations_active",
			Help: "Model calls of this replica holding a budget reservation.",
		}),
	}
	for _, l := range budget.Limits {
		m.refusals.WithLabelValues(l)
		m.stops.WithLabelValues(l)
	}
	for _, op := range []string{ledgerReserve, ledgerSettle, ledgerCheck} {
		m.errors.WithLabelValues(op)
	}
	if err := basemetrics.RegisterExclusive(reg, "orchestrator budgets", m.refusals, m.stops, m.conflicts, m.errors, m.reserved); err != nil {
		return nil, err
	}
	return m, nil
}

// initBudgets loads the budgets file and registers the metrics; an error
// makes the server refuse runs (a budgets file that does not load must
// not silently lift every limit).
func (s *Server) initBudgets() error {
	m, err := newBudgetMetrics(s.opts.Registerer)
	if err != nil {
		s.log.Error("budget metrics not registered", "error", err)
		m, _ = newBudgetMetrics(nil)
	}
	s.budget = &budgets{ttl: s.opts.BudgetReservationTTL, cache: s.opts.BudgetCacheTTL, metrics: m, file: &budget.File{}}
	f, err := budget.LoadFile(s.opts.BudgetsFile)
	if err != nil {
		return fmt.Errorf("budgets file: %w", err)
	}
	s.budget.file = f
	if f.Len() > 0 {
		s.log.Info("budgets loaded", "file", s.opts.BudgetsFile, "budgets", f.Len())
	}
	return nil
}

// budgetStores returns the budget store and the ledger, opening their KV
// buckets on first use.
func (s *Server) budgetStores(ctx context.Context) (*budget.Store, *budget.Ledger, error) {
	if s.configErr != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "orchestrator is not configured: %v", s.configErr)
	}
	b := s.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store == nil {
		kv, err := s.opts.JetStream.KeyValue(ctx, natsx.BucketBudgets)
		if err != nil {
			return nil, nil, fmt.Errorf("open KV bucket %s (is JetStream provisioned?): %w", natsx.BucketBudgets, err)
		}
		b.store = budget.NewStore(kv, b.file, b.cache)
	}
	if b.ledger == nil {
		kv, err := s.opts.JetStream.KeyValue(ctx, natsx.BucketUsage)
		if err != nil {
			return nil, nil, fmt.Errorf("open KV bucket %s (is JetStream provisioned?): %w", natsx.BucketUsage, err)
		}
		b.ledger = budget.NewLedger(kv, budget.LedgerOptions{ReservationTTL: b.ttl, OnConflict: b.metrics.conflicts.Inc})
	}
	return b.store, b.ledger, nil
}

// runLimit is the tightest per-run limit and whose it is.
type runLimit[T int32 | float64] struct {
	set   bool
	value T
	scope budget.Scope
}

func (l *runLimit[T]) tighten(v *T, s budget.Scope) {
	if v != nil && (!l.set || *v < l.value) {
		l.set, l.value, l.scope = true, *v, s
	}
}

// applied is what budgets apply to one run: the charges of the ledger
// (the tenant always, its API key when that has a budget) and the
// tightest per-run limits.
type applied struct {
	charges []budget.Charge
	steps   runLimit[int32]
	usd     runLimit[float64]
	limited bool // some charge limits days or months
}

// applicable reads the budgets of tenant and keyID.
func (s *Server) applicable(ctx context.Context, tenant, keyID string) (*budget.Ledger, *applied, error) {
	store, ledger, err := s.budgetStores(ctx)
	if err != nil {
		return nil, nil, err
	}
	a := &applied{}
	scopes := []budget.Scope{{Tenant: tenant}}
	if keyID != "" {
		scopes = append(scopes, budget.Scope{Tenant: tenant, KeyID: keyID})
	}
	for i, sc := range scopes {
		b, err := store.Effective(ctx, sc)
		if err != nil {
			return nil, nil, err
		}
		if i > 0 && budget.Empty(b) {
			continue // a key is counted only while it has a budget
		}
		a.charges = append(a.charges, budget.Charge{Scope: sc, Budget: b})
		a.steps.tighten(b.MaxStepsPerRun, sc)
		a.usd.tighten(b.MaxUsdPerRun, sc)
		a.limited = a.limited || budget.Windowed(b)
	}
	return ledger, a, nil
}

// admitBudget refuses a run whose tenant or key has reached a limit:
// ResourceExhausted naming it, with QuotaFailure and ErrorInfo details.
func (s *Server) admitBudget(ctx context.Context, tenant, keyID string) error {
	ledger, a, err := s.applicable(ctx, tenant, keyID)
	if err != nil {
		return status.Errorf(codes.Unavailable, "budgets unavailable: %v", err)
	}
	if a.usd.set && a.usd.value <= 0 {
		return s.refuse(&budget.Exceeded{Scope: a.usd.scope, Limit: budget.LimitMaxUSDPerRun, Detail: "a run may spend " + budget.USD(0)})
	}
	if !a.limited {
		return nil
	}
	if err := ledger.Check(ctx, a.charges); err != nil {
		if ex, ok := budget.AsExceeded(err); ok {
			return s.refuse(ex)
		}
		s.budget.metrics.errors.WithLabelValues(ledgerCheck).Inc()
		return status.Errorf(codes.Unavailable, "usage ledger unavailable: %v", err)
	}
	return nil
}

// refuse is StartRun's answer to a reached limit.
func (s *Server) refuse(ex *budget.Exceeded) error {
	s.budget.metrics.refusals.WithLabelValues(ex.Limit).Inc()
	return budgetStatus(ex)
}

// budgetStatus is ResourceExhausted naming the limit, with QuotaFailure
// (subject: the tenant or key) and ErrorInfo (reason BUDGET_EXCEEDED,
// metadata limit) details.
func budgetStatus(ex *budget.Exceeded) error {
	msg := "budget exceeded: " + ex.Error()
	subject := "tenant:" + ex.Scope.Tenant
	if ex.Scope.KeyID != "" {
		subject += "/api_key:" + ex.Scope.KeyID
	}
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: subject, Description: ex.Limit + ": " + ex.Detail}}},
		&errdetails.ErrorInfo{Reason: reasonBudgetExceeded, Domain: "baagent.dev", Metadata: map[string]string{"limit": ex.Limit, "tenant": ex.Scope.Tenant, "api_key_id": ex.Scope.KeyID}},
	)
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// runBudget is a run's budget state during one execution.
type runBudget struct {
	calls    int     // model calls reserved by this execution (reservation ids)
	stepCost float64 // the cost `account` computed for the last model call
	// stepPriced: that cost is known (the model has prices, the call's
	// usage was reported and within the price's prompt tier).
	stepPriced bool
}

// stopForBudget ends the run with BUDGET_EXCEEDED naming the limit.
func (r *run) stopForBudget(ex *budget.Exceeded) error {
	r.s.budget.metrics.stops.WithLabelValues(ex.Limit).Inc()
	return newRunError(CodeBudgetExceeded, ex, "the run was stopped by its budget: %s; raise the limit (baagentctl budget set) or wait for the next UTC day or month", ex.Error())
}

// budgetUnavailable ends a run whose limits cannot be enforced.
func (r *run) budgetUnavailable(op string, err error) error {
	r.s.budget.metrics.errors.WithLabelValues(op).Inc()
	return newRunError(CodeBudgetUnavailable, err, "the run has budget limits and the usage ledger is unavailable: %v", err)
}

// checkBudget is the step boundary's check: the run's step and cost
// limits, and the settled usage of its tenant and key.
func (r *run) checkBudget(ctx context.Context) error {
	ledger, a, err := r.s.applicable(ctx, r.rec.GetTenant(), r.rec.GetApiKeyId())
	if err != nil {
		return r.budgetUnavailable(ledgerCheck, err)
	}
	if a.steps.set && r.rec.GetStep() >= a.steps.value {
		return r.stopForBudget(&budget.Exceeded{Scope: a.steps.scope, Limit: budget.LimitMaxStepsPerRun,
			Detail: fmt.Sprintf("the run has taken %d steps of %d", r.rec.GetStep(), a.steps.value)})
	}
	if a.usd.set {
		if spent := r.metrics.Snapshot(time.Now(), false).GetTotalCostUsd(); spent >= a.usd.value {
			return r.stopForBudget(&budget.Exceeded{Scope: a.usd.scope, Limit: budget.LimitMaxUSDPerRun,
				Detail: fmt.Sprintf("the run has spent %s of %s", budget.USD(spent), budget.USD(a.usd.value))})
		}
	}
	if !a.limited {
		return nil
	}
	if err := ledger.Check(ctx, a.charges); err != nil {
		if ex, ok := budget.AsExceeded(err); ok {
			return r.stopForBudget(ex)
		}
		return r.budgetUnavailable(ledgerCheck, err)
	}
	return nil
}

// stepReservation is one model call's hold on the ledger.
type stepReservation struct {
	ledger *budget.Ledger
	res    *budget.Reservation
}

// reserveModelCall reserves the worst-case cost of the next model call
// (the window's prompt tokens at the input price plus the model's output
// limit at the output price; tokens only when the price is unknown) in
// the ledger entries whose limits apply.
func (r *run) reserveModelCall(ctx context.Context, step int32, info *baagentv1.ModelInfo, win *baagentv1.BuildWindowResponse) (*stepReservation, error) {
	ledger, a, err := r.s.applicable(ctx, r.rec.GetTenant(), r.rec.GetApiKeyId())
	if err != nil {
		return nil, r.budgetUnavailable(ledgerReserve, err)
	}
	meta := info.GetMetadata()
	prompt, out := max(0, win.GetBreakdown().GetTotalTokens()), max(0, meta.GetMaxOutputTokens())
	// The worst case is priced like a call (pricing.Cost): no cached
	// tokens, and unknown beyond the price's prompt tier.
	worstUSD, known := pricing.Cost(meta, &baagentv1.Usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out})
	if !known {
		worstUSD = 0
	}
	r.budget.calls++
	id := r.rec.GetRunId() + ":s" + strconv.Itoa(int(step)) + ":" + r.s.opts.Replica + ":" + strconv.Itoa(r.budget.calls)
	res, err := ledger.Reserve(ctx, id, a.charges, worstUSD, prompt+out)
	if err != nil {
		if ex, ok := budget.AsExceeded(err); ok {
			return nil, r.stopForBudget(ex)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, r.budgetUnavailable(ledgerReserve, err)
	}
	if res.Holds() {
		r.s.budget.metrics.reserved.Inc()
	}
	return &stepReservation{ledger: ledger, res: res}, nil
}

// settleModelCall counts the model call's usage at the cost `account`
// computed (u nil: the call failed, nothing is counted) and releases its
// reservation, even when the run is being cancelled. A failure is logged:
// the reservation then expires after the reservation TTL.
func (r *run) settleModelCall(sr *stepReservation, u *baagentv1.Usage, cost float64, known bool) {
	if sr == nil {
		return
	}
	if sr.res.Holds() {
		defer r.s.budget.metrics.reserved.Dec()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	c := budget.Cost{USD: cost, Input: u.GetPromptTokens(), Output: u.GetCompletionTokens(), Unpriced: !known}
	if err := sr.ledger.Settle(ctx, sr.res, c); err != nil {
		r.s.budget.metrics.errors.WithLabelValues(ledgerSettle).Inc()
		r.log.Warn("model call not counted in the usage ledger; its reservation expires", "error", err, "cost_usd", cost)
	}
}

// GetUsage returns the usage of a tenant (or API key) today and this
// month, and of each of the last history_days days.
func (s *Server) GetUsage(ctx context.Context, req *baagentv1.OrchestratorServiceGetUsageRequest) (*baagentv1.OrchestratorServiceGetUsageResponse, error) {
	if err := validateGetUsage(req); err != nil {
		return nil, s.rejected(ctx, "GetUsage", err)
	}
	store, ledger, err := s.budgetStores(ctx)
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	sc := budget.Scope{Tenant: req.GetTenant(), KeyID: req.GetApiKeyId()}
	entry, err := store.Entry(ctx, sc)
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	day, month, history, err := ledger.Report(ctx, sc, int(req.GetHistoryDays()))
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	return &baagentv1.OrchestratorServiceGetUsageResponse{Usage: &baagentv1.UsageReport{
		Tenant: sc.Tenant, ApiKeyId: sc.KeyID, Day: day, Month: month, History: history,
		Budget: entry.GetBudget(), Source: entry.GetSource(), AsOf: ledger.Now(),
	}}, nil
}

// GetBudget returns a tenant's (or API key's) budget.
func (s *Server) GetBudget(ctx context.Context, req *baagentv1.OrchestratorServiceGetBudgetRequest) (*baagentv1.OrchestratorServiceGetBudgetResponse, error) {
	if err := validateBudgetScope(req.GetTenant(), req.GetApiKeyId()); err != nil {
		return nil, s.rejected(ctx, "GetBudget", err)
	}
	store, _, err := s.budgetStores(ctx)
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	entry, err := store.Entry(ctx, budget.Scope{Tenant: req.GetTenant(), KeyID: req.GetApiKeyId()})
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	return &baagentv1.OrchestratorServiceGetBudgetResponse{Entry: entry}, nil
}

// SetBudget writes or clears the admin API's budget of a tenant (or key).
func (s *Server) SetBudget(ctx context.Context, req *baagentv1.OrchestratorServiceSetBudgetRequest) (*baagentv1.OrchestratorServiceSetBudgetResponse, error) {
	if err := validateSetBudget(req); err != nil {
		return nil, s.rejected(ctx, "SetBudget", err)
	}
	store, _, err := s.budgetStores(ctx)
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	sc := budget.Scope{Tenant: req.GetTenant(), KeyID: req.GetApiKeyId()}
	var entry *baagentv1.BudgetEntry
	if req.GetClear() {
		entry, err = store.Clear(ctx, sc)
	} else {
		entry, err = store.Set(ctx, sc, req.GetBudget())
	}
	if err != nil {
		return nil, budgetStoreStatus(err)
	}
	s.log.InfoContext(ctx, "budget changed", "tenant", sc.Tenant, "api_key_id", sc.KeyID, "cleared", req.GetClear(), "source", entry.GetSource().String())
	return &baagentv1.OrchestratorServiceSetBudgetResponse{Entry: entry}, nil
}

// budgetStoreStatus maps a budget store or ledger error to a status.
func budgetStoreStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "budgets unavailable: %v", err)
}
