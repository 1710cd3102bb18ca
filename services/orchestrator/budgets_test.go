package orchestrator

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/budget"
)

// Each step of the budget tests' model costs stepUSD at priced-model's
// prices (2.5 and 10 USD per 1M tokens); its worst case, reserved before
// the call, is its 4096 output tokens at 10 USD per 1M (the fake context
// reports no prompt tokens), $0.04096.
const (
	stepPrompt     = 10000
	stepCompletion = 500
	stepUSD        = stepPrompt*2.5/1e6 + stepCompletion*10.0/1e6 // 0.03
)

// spender is a model that calls a tool at every step (with new arguments,
// so no doom loop is seen) and reports known usage.
func spender(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
	r := callTools("more", fmt.Sprintf("call_%d", n), "noop", fmt.Sprintf(`{"n": %d}`, n))
	r.Usage = &baagentv1.Usage{PromptTokens: stepPrompt, CompletionTokens: stepCompletion, TotalTokens: stepPrompt + stepCompletion}
	return r, nil
}

func budgetHarness(t *testing.T, mutate func(*Options)) *harness {
	return newHarness(t, spender, harnessOptions{mutate: func(o *Options) {
		o.DefaultModel = "priced-model"
		o.SkillTriggers = SkillTriggersOff
		o.BudgetCacheTTL = -1 // every read sees the last SetBudget
		if mutate != nil {
			mutate(o)
		}
	}})
}

func setBudget(ctx context.Context, t *testing.T, c baagentv1.OrchestratorServiceClient, tenant, key string, b *baagentv1.Budget) {
	t.Helper()
	if _, err := c.SetBudget(ctx, &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: tenant, ApiKeyId: key, Budget: b}); err != nil {
		t.Fatalf("SetBudget: %v", err)
	}
}

func usageOf(ctx context.Context, t *testing.T, c baagentv1.OrchestratorServiceClient, tenant, key string) *baagentv1.UsageReport {
	t.Helper()
	resp, err := c.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: tenant, ApiKeyId: key})
	if err != nil {
		t.Fatalf("GetUsage: %v", err)
	}
	return resp.GetUsage()
}

func pf(v float64) *float64 { return &v }
func pi64(v int64) *int64   { return &v }
func pi32(v int32) *int32   { return &v }

// budgetError returns the error event ending a run, checking that it is
// the only terminal one and that the run's record says FAILED with it.
func (h *harness) budgetStop(ctx context.Context, t *testing.T, run *baagentv1.Run) *baagentv1.ErrorPayload {
	t.Helper()
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	last := evs[len(evs)-1].GetError()
	if last.GetCode() != CodeBudgetExceeded {
		t.Fatalf("run ended with %v, want %s; events %v", evs[len(evs)-1], CodeBudgetExceeded, types(evs))
	}
	rec := h.waitRun(ctx, run.GetRunId())
	if rec.GetState() != baagentv1.RunState_RUN_STATE_FAILED || rec.GetError().GetCode() != CodeBudgetExceeded {
		t.Fatalf("record %v %v, want FAILED with %s", rec.GetState(), rec.GetError(), CodeBudgetExceeded)
	}
	return last
}

func quotaLimit(t *testing.T, err error) (string, *errdetails.QuotaFailure) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
	var limit string
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			limit = d.GetMetadata()["limit"]
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	if qf == nil || len(qf.GetViolations()) != 1 || !strings.Contains(st.Message(), limit) {
		t.Fatalf("status %v lacks QuotaFailure or does not name the limit %q", st, limit)
	}
	return limit, qf
}

func TestStartRunRefusedBeyondBudget(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)
	for _, tc := range []struct {
		limit string
		b     *baagentv1.Budget
	}{
		{"usd_per_day", &baagentv1.Budget{UsdPerDay: pf(0)}},
		{"usd_per_month", &baagentv1.Budget{UsdPerMonth: pf(0)}},
		{"tokens_per_day", &baagentv1.Budget{TokensPerDay: pi64(0)}},
		{"max_usd_per_run", &baagentv1.Budget{MaxUsdPerRun: pf(0)}},
	} {
		setBudget(ctx, t, h.client, testTenant, "", tc.b)
		_, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "hi"}})
		limit, qf := quotaLimit(t, err)
		if limit != tc.limit || qf.GetViolations()[0].GetSubject() != "tenant:"+testTenant {
			t.Errorf("%s: refused for %q (%v)", tc.limit, limit, qf)
		}
	}
	if got := testutil.ToFloat64(h.srv.budget.metrics.refusals.WithLabelValues("tokens_per_day")); got != 1 {
		t.Errorf("budget_refusals_total{limit=tokens_per_day} = %v", got)
	}
	// Nothing was left behind by the refusals.
	list, err := h.client.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant})
	if err != nil || len(list.GetRuns()) != 0 {
		t.Fatalf("ListRuns after refusals = %v, %v", list.GetRuns(), err)
	}
	// A key's own budget applies to the runs it starts, not to others'.
	if _, err := h.client.SetBudget(ctx, &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: testTenant, Clear: true}); err != nil {
		t.Fatal(err)
	}
	setBudget(ctx, t, h.client, testTenant, "0123abcd", &baagentv1.Budget{UsdPerDay: pf(0)})
	_, err = h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, ApiKeyId: "0123abcd", Spec: &baagentv1.RunSpec{Input: "hi", MaxSteps: 1}})
	if _, qf := quotaLimit(t, err); qf.GetViolations()[0].GetSubject() != "tenant:"+testTenant+"/api_key:0123abcd" {
		t.Errorf("key refusal subject %q", qf.GetViolations()[0].GetSubject())
	}
	run, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, ApiKeyId: "89abcdef", Spec: &baagentv1.RunSpec{Input: "hi", MaxSteps: 1}})
	if err != nil {
		t.Fatalf("another key's run: %v", err)
	}
	if got := h.waitRun(ctx, run.GetRun().GetRunId()); got.GetApiKeyId() != "89abcdef" {
		t.Errorf("run's api_key_id = %q", got.GetApiKeyId())
	}
}

func TestRunStoppedMidRunByTenantBudget(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)
	// $0.10 a day: steps of $0.03 reserving $0.041 each: the third step's
	// reservation (0.06 + 0.041) does not fit.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{UsdPerDay: pf(0.10)})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "spend"})
	ep := h.budgetStop(ctx, t, run)
	if !strings.Contains(ep.GetMessage(), "usd_per_day") || !strings.Contains(ep.GetMessage(), "tenant "+testTenant) {
		t.Errorf("error message %q does not name the limit", ep.GetMessage())
	}
	rec := h.waitRun(ctx, run.GetRunId())
	u := usageOf(ctx, t, h.client, testTenant, "")
	if math.Abs(u.GetDay().GetCostUsd()-2*stepUSD) > 1e-9 || math.Abs(rec.GetMetrics().GetTotalCostUsd()-2*stepUSD) > 1e-9 {
		t.Errorf("ledger %v, run %v, want %v", u.GetDay().GetCostUsd(), rec.GetMetrics().GetTotalCostUsd(), 2*stepUSD)
	}
	if u.GetDay().GetReservedUsd() != 0 || u.GetMonth().GetReservedUsd() != 0 || u.GetDay().GetModelCalls() != 2 || u.GetDay().GetInputTokens() != 2*stepPrompt {
		t.Errorf("usage %v", u)
	}
	if u.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_API || u.GetBudget().GetUsdPerDay() != 0.10 {
		t.Errorf("usage report's budget %v %v", u.GetBudget(), u.GetSource())
	}
	if got := testutil.ToFloat64(h.srv.budget.metrics.stops.WithLabelValues("usd_per_day")); got != 1 {
		t.Errorf("budget_stops_total{limit=usd_per_day} = %v", got)
	}
	// Settled usage is now 0.06 < 0.10: a new run starts, and stops at
	// its first reservation.
	run2 := h.start(ctx, &baagentv1.RunSpec{Input: "spend more"})
	h.budgetStop(ctx, t, run2)
}

func TestRunStoppedByTokensPerDay(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)
	// Each step reserves 4096 tokens and uses 10500: the second step's
	// reservation does not fit under 14000.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{TokensPerDay: pi64(14000)})
	ep := h.budgetStop(ctx, t, h.start(ctx, &baagentv1.RunSpec{Input: "spend"}))
	if !strings.Contains(ep.GetMessage(), "tokens_per_day") {
		t.Errorf("message %q", ep.GetMessage())
	}
}

func TestPerRunLimits(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)

	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{MaxStepsPerRun: pi32(2)})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "spend"})
	ep := h.budgetStop(ctx, t, run)
	if !strings.Contains(ep.GetMessage(), "max_steps_per_run") || !strings.Contains(ep.GetMessage(), "2 steps of 2") {
		t.Errorf("message %q", ep.GetMessage())
	}
	if rec := h.waitRun(ctx, run.GetRunId()); rec.GetStep() != 2 {
		t.Errorf("run took %d steps, want 2", rec.GetStep())
	}

	// $0.05 a run: the run crosses it on its second step ($0.06) and
	// stops at the next boundary.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{MaxUsdPerRun: pf(0.05)})
	run = h.start(ctx, &baagentv1.RunSpec{Input: "spend"})
	ep = h.budgetStop(ctx, t, run)
	if !strings.Contains(ep.GetMessage(), "max_usd_per_run") || !strings.Contains(ep.GetMessage(), "$0.06 of $0.05") {
		t.Errorf("message %q", ep.GetMessage())
	}
	// The tighter of the tenant's and the key's per-run limits applies.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{MaxStepsPerRun: pi32(5)})
	setBudget(ctx, t, h.client, testTenant, "0123abcd", &baagentv1.Budget{MaxStepsPerRun: pi32(1)})
	resp, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, ApiKeyId: "0123abcd", Spec: &baagentv1.RunSpec{Input: "spend"}})
	if err != nil {
		t.Fatal(err)
	}
	ep = h.budgetStop(ctx, t, resp.GetRun())
	if !strings.Contains(ep.GetMessage(), "API key 0123abcd") || !strings.Contains(ep.GetMessage(), "1 steps of 1") {
		t.Errorf("message %q", ep.GetMessage())
	}
	// The key has a budget: its usage is counted apart.
	if u := usageOf(ctx, t, h.client, testTenant, "0123abcd"); math.Abs(u.GetDay().GetCostUsd()-stepUSD) > 1e-9 {
		t.Errorf("key usage %v, want one step", u.GetDay())
	}
}

// TestTwoRunsRaceForTheLastDollar: runs on two replicas spend against one
// daily limit of $1.00 at once. The reservations keep the total within the
// limit (at most one step's cost over it is allowed), the ledger equals
// what the runs report, and nothing stays reserved.
func TestTwoRunsRaceForTheLastDollar(t *testing.T) {
	ctx := testCtx(t)
	// Two runs at most on each replica: the four runs take both.
	h := budgetHarness(t, func(o *Options) { o.MaxConcurrentRuns = 2 })
	_, client2, _ := h.replica("test-replica-2")
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{UsdPerDay: pf(1.00)})

	const runs = 4
	ids := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		c := h.client
		if i%2 == 1 {
			c = client2
		}
		wg.Go(func() {
			resp, err := c.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: fmt.Sprint("spend ", i), MaxSteps: 100}})
			if err != nil {
				t.Errorf("StartRun %d: %v", i, err)
				return
			}
			ids[i] = resp.GetRun().GetRunId()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	total := 0.0
	replicas := map[string]bool{}
	for _, id := range ids {
		rec := h.waitRun(ctx, id)
		h.budgetStop(ctx, t, rec)
		total += rec.GetMetrics().GetTotalCostUsd()
		evs := h.events(ctx, id)
		replicas[evs[0].GetStart().GetReplica()] = true
	}
	u := usageOf(ctx, t, h.client, testTenant, "")
	t.Logf("runs spent $%.4f over replicas %v; ledger $%.4f in %d calls", total, replicas, u.GetDay().GetCostUsd(), u.GetDay().GetModelCalls())
	if len(replicas) != 2 {
		t.Errorf("the runs ran on %v, want both replicas", replicas)
	}
	if total > 1.00+stepUSD+1e-9 {
		t.Errorf("runs spent $%v under a $1.00 limit (one step is $%v)", total, stepUSD)
	}
	if total < 1.00-2*0.04096 {
		t.Errorf("runs spent only $%v: stopped too early", total)
	}
	if math.Abs(u.GetDay().GetCostUsd()-total) > 1e-6 || math.Abs(u.GetMonth().GetCostUsd()-total) > 1e-6 {
		t.Errorf("ledger day $%v month $%v, runs $%v", u.GetDay().GetCostUsd(), u.GetMonth().GetCostUsd(), total)
	}
	if u.GetDay().GetReservedUsd() != 0 || u.GetDay().GetReservedTokens() != 0 || u.GetMonth().GetReservedUsd() != 0 {
		t.Errorf("reservations left: %v", u)
	}
	testkit.Eventually(t, remaining(ctx), "no reservation gauge left", func() bool {
		return testutil.ToFloat64(h.srv.budget.metrics.reserved) == 0
	})
}

func TestBudgetAPIValidation(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)
	cases := []struct {
		name  string
		req   *baagentv1.OrchestratorServiceSetBudgetRequest
		field string
	}{
		{"no tenant", &baagentv1.OrchestratorServiceSetBudgetRequest{Budget: &baagentv1.Budget{}}, "tenant"},
		{"bad tenant", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "a.b", Budget: &baagentv1.Budget{}}, "tenant"},
		{"bad key id", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", ApiKeyId: "sk-secret", Budget: &baagentv1.Budget{}}, "api_key_id"},
		{"negative", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{UsdPerDay: pf(-1)}}, "budget.usd_per_day"},
		{"nan", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{MaxUsdPerRun: pf(math.NaN())}}, "budget.max_usd_per_run"},
		{"negative tokens", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{TokensPerDay: pi64(-1)}}, "budget.tokens_per_day"},
		{"zero steps", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{MaxStepsPerRun: pi32(0)}}, "budget.max_steps_per_run"},
		{"no budget", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme"}, "budget"},
		{"clear with budget", &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: "acme", Clear: true, Budget: &baagentv1.Budget{}}, "budget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.SetBudget(ctx, tc.req)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			found := false
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						found = found || v.GetField() == tc.field
					}
				}
			}
			if !found {
				t.Fatalf("%v does not name %s", st, tc.field)
			}
		})
	}
	for _, key := range []string{"ABCDEF01", "abc"} {
		if _, err := h.client.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: "acme", ApiKeyId: key}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetUsage with key %q: %v", key, err)
		}
		if _, err := h.client.GetBudget(ctx, &baagentv1.OrchestratorServiceGetBudgetRequest{Tenant: "acme", ApiKeyId: key}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetBudget with key %q: %v", key, err)
		}
	}
	_, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, ApiKeyId: "nothex!!", Spec: &baagentv1.RunSpec{Input: "hi"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "api_key_id") {
		t.Errorf("StartRun with a bad api_key_id: %v", err)
	}
}

func TestBudgetsFileAndAPI(t *testing.T) {
	ctx := testCtx(t)
	file := filepath.Join(t.TempDir(), "budgets.yaml")
	if err := os.WriteFile(file, []byte("tenants:\n  "+testTenant+":\n    usd_per_day: 0\n    max_steps_per_run: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := budgetHarness(t, func(o *Options) { o.BudgetsFile = file })
	get := func() *baagentv1.BudgetEntry {
		resp, err := h.client.GetBudget(ctx, &baagentv1.OrchestratorServiceGetBudgetRequest{Tenant: testTenant})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetEntry()
	}
	if e := get(); e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_FILE || e.GetBudget().GetMaxStepsPerRun() != 3 || e.GetApiBudget() != nil {
		t.Fatalf("file entry %v", e)
	}
	_, err := h.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "hi"}})
	if limit, _ := quotaLimit(t, err); limit != "usd_per_day" {
		t.Fatalf("refused for %q", limit)
	}
	// The API's entry wins over the file's.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{MaxStepsPerRun: pi32(1)})
	if e := get(); e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_API || e.GetFileBudget().GetMaxStepsPerRun() != 3 {
		t.Fatalf("API entry %v", e)
	}
	h.budgetStop(ctx, t, h.start(ctx, &baagentv1.RunSpec{Input: "spend"}))
	// Cleared, the file applies again.
	resp, err := h.client.SetBudget(ctx, &baagentv1.OrchestratorServiceSetBudgetRequest{Tenant: testTenant, Clear: true})
	if err != nil || resp.GetEntry().GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_FILE {
		t.Fatalf("clear = %v, %v", resp.GetEntry(), err)
	}
}

func TestBadBudgetsFileRefusesRuns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "budgets.yaml")
	if err := os.WriteFile(file, []byte("tenants:\n  acme:\n    usd_per_dya: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := budgetHarness(t, func(o *Options) { o.BudgetsFile = file })
	_, err := h.client.StartRun(testCtx(t), &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "hi"}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "usd_per_dya") {
		t.Fatalf("StartRun with a bad budgets file: %v", err)
	}
}

// TestUnsettledReservationExpires: a reservation left by a replica that
// crashed during its model call holds the budget only until the
// reservation TTL; then runs spend again.
func TestUnsettledReservationExpires(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, func(o *Options) { o.BudgetReservationTTL = time.Second })
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{UsdPerDay: pf(0.10)})
	kv, err := h.js.KeyValue(ctx, natsx.BucketUsage)
	if err != nil {
		t.Fatal(err)
	}
	crashed := budget.NewLedger(kv, budget.LedgerOptions{ReservationTTL: time.Second})
	charges := []budget.Charge{{Scope: budget.Scope{Tenant: testTenant}, Budget: &baagentv1.Budget{UsdPerDay: pf(0.10)}}}
	if _, err := crashed.Reserve(ctx, "crashed-replica-call", charges, 0.09, 0); err != nil {
		t.Fatal(err)
	}
	// Held: the first step cannot reserve its $0.041.
	ep := h.budgetStop(ctx, t, h.start(ctx, &baagentv1.RunSpec{Input: "spend"}))
	if !strings.Contains(ep.GetMessage(), "usd_per_day") {
		t.Fatalf("message %q", ep.GetMessage())
	}
	if u := usageOf(ctx, t, h.client, testTenant, ""); u.GetDay().GetCostUsd() != 0 {
		t.Fatalf("a refused step was counted: %v", u.GetDay())
	}
	// Expired: reported as nothing reserved, and a run spends again.
	testkit.Eventually(t, remaining(ctx), "the crashed reservation expired", func() bool {
		return usageOf(ctx, t, h.client, testTenant, "").GetDay().GetReservedUsd() == 0
	})
	h.budgetStop(ctx, t, h.start(ctx, &baagentv1.RunSpec{Input: "spend again"}))
	if u := usageOf(ctx, t, h.client, testTenant, ""); math.Abs(u.GetDay().GetCostUsd()-2*stepUSD) > 1e-9 {
		t.Fatalf("after expiry the run spent %v, want two steps", u.GetDay().GetCostUsd())
	}
}

func TestGetUsageHistory(t *testing.T) {
	ctx := testCtx(t)
	h := budgetHarness(t, nil)
	// One step's cost, then the run stops at the second reservation.
	setBudget(ctx, t, h.client, testTenant, "", &baagentv1.Budget{TokensPerDay: pi64(14000)})
	h.budgetStop(ctx, t, h.start(ctx, &baagentv1.RunSpec{Input: "spend"}))

	resp, err := h.client.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: testTenant, HistoryDays: 30})
	if err != nil {
		t.Fatal(err)
	}
	u := resp.GetUsage()
	hist := u.GetHistory()
	if len(hist) != 30 {
		t.Fatalf("history has %d days, want 30", len(hist))
	}
	today := hist[29]
	if !proto.Equal(today, u.GetDay()) || today.GetInputTokens() != stepPrompt || today.GetOutputTokens() != stepCompletion {
		t.Errorf("history's today %v, day %v", today, u.GetDay())
	}
	now := time.Now().UTC()
	if today.GetPeriod() != budget.Day(now) && today.GetPeriod() != budget.Day(now.Add(-time.Minute)) {
		t.Errorf("today is %s", today.GetPeriod())
	}
	for i := 1; i < len(hist); i++ {
		prev, err1 := time.Parse(time.DateOnly, hist[i-1].GetPeriod())
		cur, err2 := time.Parse(time.DateOnly, hist[i].GetPeriod())
		if err1 != nil || err2 != nil || !cur.Equal(prev.AddDate(0, 0, 1)) {
			t.Fatalf("days %s and %s do not follow each other", hist[i-1].GetPeriod(), hist[i].GetPeriod())
		}
		if i < len(hist)-1 && (hist[i].GetCostUsd() != 0 || hist[i].GetInputTokens() != 0) {
			t.Errorf("day %s without runs reports %v", hist[i].GetPeriod(), hist[i])
		}
	}
	if u := usageOf(ctx, t, h.client, testTenant, ""); len(u.GetHistory()) != 0 {
		t.Errorf("history without history_days: %d days", len(u.GetHistory()))
	}
	if resp, err := h.client.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: testTenant, HistoryDays: 62}); err != nil || len(resp.GetUsage().GetHistory()) != 62 {
		t.Errorf("62 days: %d, %v", len(resp.GetUsage().GetHistory()), err)
	}
	for _, days := range []int32{-1, 63, 1000} {
		_, err := h.client.GetUsage(ctx, &baagentv1.OrchestratorServiceGetUsageRequest{Tenant: testTenant, HistoryDays: days})
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "history_days") {
			t.Errorf("history_days %d: %v", days, err)
		}
	}
}
