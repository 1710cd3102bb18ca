package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

const keyAdmin = "admin-key-0123456789"

// budgetOrch is the fake orchestrator with budgets kept in memory and the
// key ids of started runs recorded.
type budgetOrch struct {
	*fakeOrchestrator
	mu      sync.Mutex
	budgets map[string]*baagentv1.Budget // tenant/key id
	keyIDs  []string
	// historyDays of every GetUsage request.
	historyDays []int32
}

func (b *budgetOrch) StartRun(ctx context.Context, req *baagentv1.OrchestratorServiceStartRunRequest) (*baagentv1.OrchestratorServiceStartRunResponse, error) {
	b.mu.Lock()
	b.keyIDs = append(b.keyIDs, req.GetApiKeyId())
	b.mu.Unlock()
	return b.fakeOrchestrator.StartRun(ctx, req)
}

func (b *budgetOrch) entry(tenant, key string) *baagentv1.BudgetEntry {
	e := &baagentv1.BudgetEntry{Tenant: tenant, ApiKeyId: key, Budget: &baagentv1.Budget{}, Source: baagentv1.BudgetSource_BUDGET_SOURCE_NONE}
	if bud, ok := b.budgets[tenant+"/"+key]; ok {
		e.Budget, e.ApiBudget, e.Source = bud, bud, baagentv1.BudgetSource_BUDGET_SOURCE_API
	}
	return e
}

func (b *budgetOrch) GetUsage(_ context.Context, req *baagentv1.OrchestratorServiceGetUsageRequest) (*baagentv1.OrchestratorServiceGetUsageResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(req.GetTenant(), req.GetApiKeyId())
	b.historyDays = append(b.historyDays, req.GetHistoryDays())
	var history []*baagentv1.UsageWindow
	for i := range req.GetHistoryDays() {
		history = append(history, &baagentv1.UsageWindow{Period: fmt.Sprintf("day-%d", i), InputTokens: int64(i)})
	}
	return &baagentv1.OrchestratorServiceGetUsageResponse{Usage: &baagentv1.UsageReport{
		Tenant: req.GetTenant(), ApiKeyId: req.GetApiKeyId(), Budget: e.GetBudget(), Source: e.GetSource(),
		Day: &baagentv1.UsageWindow{Period: "2026-12-04", CostUsd: 0.5}, Month: &baagentv1.UsageWindow{Period: "2026-12", CostUsd: 1.5},
		History: history,
	}}, nil
}

func (b *budgetOrch) GetBudget(_ context.Context, req *baagentv1.OrchestratorServiceGetBudgetRequest) (*baagentv1.OrchestratorServiceGetBudgetResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &baagentv1.OrchestratorServiceGetBudgetResponse{Entry: b.entry(req.GetTenant(), req.GetApiKeyId())}, nil
}

func (b *budgetOrch) SetBudget(_ context.Context, req *baagentv1.OrchestratorServiceSetBudgetRequest) (*baagentv1.OrchestratorServiceSetBudgetResponse, error) {
	if req.GetBudget().GetUsdPerDay() < 0 {
		// As the real orchestrator, which checks the values.
		return nil, status.Error(codes.InvalidArgument, "invalid SetBudget request: budget.usd_per_day: must not be negative")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := req.GetTenant() + "/" + req.GetApiKeyId()
	if req.GetClear() {
		delete(b.budgets, k)
	} else {
		b.budgets[k] = req.GetBudget()
	}
	return &baagentv1.OrchestratorServiceSetBudgetResponse{Entry: b.entry(req.GetTenant(), req.GetApiKeyId())}, nil
}

// newBudgetEnv is newEnv with budgetOrch and an admin key.
func newBudgetEnv(t *testing.T, opts Options) (*env, *budgetOrch) {
	t.Helper()
	js, _ := natstest.JetStream(t)
	orch := &budgetOrch{fakeOrchestrator: &fakeOrchestrator{runs: map[string]*baagentv1.Run{}}, budgets: map[string]*baagentv1.Budget{}}
	oconn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterOrchestratorServiceServer(gs, orch) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.Registerer = reg
	opts.JetStream = js
	opts.Orchestrator = baagentv1.NewOrchestratorServiceClient(oconn)
	opts.HTTPListener = lis
	if opts.APIKeys == nil {
		opts.APIKeys = map[string]string{keyAcme: "acme", keyInitech: "initech"}
	}
	if opts.AdminAPIKeys == nil {
		opts.AdminAPIKeys = []string{keyAdmin}
	}
	srv := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	gconn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { srv.Register(gs) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &env{t: t, js: js, orch: orch.fakeOrchestrator, srv: srv, reg: reg, base: "http://" + lis.Addr().String(),
		client: baagentv1.NewGatewayServiceClient(gconn)}, orch
}

func keyIDOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

func TestKeyIDIsTheStartOfTheKeysHash(t *testing.T) {
	if got, want := KeyID(keyAcme), keyIDOf(keyAcme); got != want || len(got) != 8 {
		t.Fatalf("KeyID = %q, want %q", got, want)
	}
	if (caller{}).keyID() != "" {
		t.Error("a caller without a key has a key id")
	}
}

func TestStartRunPassesTheKeyID(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	if _, err := e.client.StartRun(withKey(ctx, keyAcme), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: "hi"}}); err != nil {
		t.Fatal(err)
	}
	code, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: `{"spec":{"input":"hi"}}`,
		header: map[string]string{"Authorization": "Bearer " + keyInitech, "Content-Type": "application/json"}})
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs = %d %s", code, body)
	}
	orch.mu.Lock()
	defer orch.mu.Unlock()
	if len(orch.keyIDs) != 2 || orch.keyIDs[0] != keyIDOf(keyAcme) || orch.keyIDs[1] != keyIDOf(keyInitech) {
		t.Fatalf("key ids passed = %v", orch.keyIDs)
	}
}

func TestGetUsage(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	resp, err := e.client.GetUsage(withKey(ctx, keyAcme), &baagentv1.GatewayServiceGetUsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetUsage().GetTenant() != "acme" || resp.GetUsage().GetDay().GetCostUsd() != 0.5 || resp.GetKeyUsage() != nil {
		t.Fatalf("GetUsage = %v", resp)
	}
	// With a budget of its own, the key's usage is reported too.
	orch.budgets["acme/"+keyIDOf(keyAcme)] = &baagentv1.Budget{UsdPerDay: proto.Float64(1)}
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/usage", header: map[string]string{"X-Api-Key": keyAcme}})
	if code != http.StatusOK {
		t.Fatalf("GET /v1/usage = %d %s", code, body)
	}
	var got struct {
		Usage    struct{ Tenant string } `json:"usage"`
		KeyUsage struct {
			APIKeyID string `json:"api_key_id"`
			Budget   struct {
				UsdPerDay float64 `json:"usd_per_day"`
			} `json:"budget"`
		} `json:"key_usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Usage.Tenant != "acme" || got.KeyUsage.APIKeyID != keyIDOf(keyAcme) || got.KeyUsage.Budget.UsdPerDay != 1 {
		t.Fatalf("GET /v1/usage body %s", body)
	}
	if code, _, _ := e.send(t, request{method: "GET", path: "/v1/usage"}); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/usage without a key = %d", code)
	}
	// The admin key is not a tenant key.
	if code, _, _ := e.send(t, request{method: "GET", path: "/v1/usage", header: map[string]string{"X-Api-Key": keyAdmin}}); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/usage with the admin key = %d", code)
	}
}

func TestGetUsageHistory(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	orch.budgets["acme/"+keyIDOf(keyAcme)] = &baagentv1.Budget{UsdPerDay: proto.Float64(1)}
	resp, err := e.client.GetUsage(withKey(ctx, keyAcme), &baagentv1.GatewayServiceGetUsageRequest{HistoryDays: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetUsage().GetHistory()) != 30 || len(resp.GetKeyUsage().GetHistory()) != 30 {
		t.Fatalf("history: tenant %d days, key %d days", len(resp.GetUsage().GetHistory()), len(resp.GetKeyUsage().GetHistory()))
	}
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/usage?history_days=7", header: map[string]string{"Authorization": "Bearer " + keyAcme}})
	if code != http.StatusOK {
		t.Fatalf("GET /v1/usage?history_days=7 = %d %s", code, body)
	}
	var got struct {
		Usage struct {
			History []struct {
				Period      string `json:"period"`
				InputTokens string `json:"input_tokens"`
			} `json:"history"`
		} `json:"usage"`
		KeyUsage struct {
			History []json.RawMessage `json:"history"`
		} `json:"key_usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if h := got.Usage.History; len(h) != 7 || h[6].Period != "day-6" || h[6].InputTokens != "6" || len(got.KeyUsage.History) != 7 {
		t.Fatalf("GET /v1/usage?history_days=7 body %s", body)
	}
	orch.mu.Lock()
	if want := []int32{30, 30, 7, 7}; fmt.Sprint(orch.historyDays) != fmt.Sprint(want) {
		t.Errorf("history_days passed = %v, want %v", orch.historyDays, want)
	}
	orch.historyDays = nil
	orch.mu.Unlock()

	for _, bad := range []string{"-1", "63", "abc", "1.5", "99999999999"} {
		code, body, _ := e.send(t, request{method: "GET", path: "/v1/usage?history_days=" + bad, header: map[string]string{"Authorization": "Bearer " + keyAcme}})
		if code != http.StatusBadRequest || !strings.Contains(body, "history_days") {
			t.Errorf("history_days=%s: %d %s", bad, code, body)
		}
	}
	for _, bad := range []int32{-1, 63} {
		_, err := e.client.GetUsage(withKey(ctx, keyAcme), &baagentv1.GatewayServiceGetUsageRequest{HistoryDays: bad})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "history_days") {
			t.Errorf("gRPC history_days %d: %v", bad, err)
		}
	}
	orch.mu.Lock()
	defer orch.mu.Unlock()
	if len(orch.historyDays) != 0 {
		t.Errorf("refused requests reached the orchestrator: %v", orch.historyDays)
	}
}

func TestAdminBudgetAPI(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	admin := map[string]string{"Authorization": "Bearer " + keyAdmin, "Content-Type": "application/json"}

	code, body, _ := e.send(t, request{method: "PUT", path: "/v1/admin/tenants/initech/budget", body: `{"usd_per_day": 5, "max_steps_per_run": 20}`, header: admin})
	if code != http.StatusOK || !strings.Contains(body, `"source":"BUDGET_SOURCE_API"`) {
		t.Fatalf("PUT budget = %d %s", code, body)
	}
	if b := orch.budgets["initech/"]; b.GetUsdPerDay() != 5 || b.GetMaxStepsPerRun() != 20 || b.UsdPerMonth != nil {
		t.Fatalf("stored budget %v", b)
	}
	code, body, _ = e.send(t, request{method: "GET", path: "/v1/admin/tenants/initech/budget", header: admin})
	if code != http.StatusOK || !strings.Contains(body, `"usd_per_day":5`) {
		t.Fatalf("GET budget = %d %s", code, body)
	}
	key := keyIDOf(keyInitech)
	code, body, _ = e.send(t, request{method: "PUT", path: "/v1/admin/tenants/initech/budget?api_key_id=" + key, body: `{"usd_per_month": 0}`, header: admin})
	if code != http.StatusOK || orch.budgets["initech/"+key].UsdPerMonth == nil {
		t.Fatalf("PUT key budget = %d %s", code, body)
	}
	code, body, _ = e.send(t, request{method: "DELETE", path: "/v1/admin/tenants/initech/budget", header: admin})
	if code != http.StatusOK || !strings.Contains(body, "BUDGET_SOURCE_NONE") {
		t.Fatalf("DELETE budget = %d %s", code, body)
	}
	if _, ok := orch.budgets["initech/"]; ok {
		t.Fatal("DELETE left the budget")
	}

	// gRPC, the same.
	actx := withKey(ctx, keyAdmin)
	if _, err := e.client.SetBudget(actx, &baagentv1.GatewayServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{TokensPerDay: proto.Int64(1000)}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.client.GetBudget(actx, &baagentv1.GatewayServiceGetBudgetRequest{Tenant: "acme"})
	if err != nil || got.GetEntry().GetBudget().GetTokensPerDay() != 1000 {
		t.Fatalf("GetBudget = %v, %v", got, err)
	}
}

func TestAdminBudgetAPIRefusesBadInput(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	admin := map[string]string{"Authorization": "Bearer " + keyAdmin, "Content-Type": "application/json"}
	tenantKey := map[string]string{"Authorization": "Bearer " + keyAcme, "Content-Type": "application/json"}
	cases := []struct {
		name   string
		r      request
		status int
		want   string
	}{
		{"unknown field", request{method: "PUT", path: "/v1/admin/tenants/acme/budget", body: `{"usd_per_dya": 1}`, header: admin}, 400, "usd_per_dya"},
		{"not json", request{method: "PUT", path: "/v1/admin/tenants/acme/budget", body: `usd_per_day=1`, header: admin}, 400, "body"},
		{"negative", request{method: "PUT", path: "/v1/admin/tenants/acme/budget", body: `{"usd_per_day": -1}`, header: admin}, 400, "usd_per_day"},
		{"bad tenant", request{method: "GET", path: "/v1/admin/tenants/ac.me/budget", header: admin}, 400, "tenant"},
		{"bad key id", request{method: "GET", path: "/v1/admin/tenants/acme/budget?api_key_id=" + keyAcme, header: admin}, 400, "api_key_id"},
		{"tenant key", request{method: "PUT", path: "/v1/admin/tenants/acme/budget", body: `{"usd_per_day": 100}`, header: tenantKey}, 403, "admin API key"},
		{"tenant key get", request{method: "GET", path: "/v1/admin/tenants/initech/budget", header: tenantKey}, 403, "admin API key"},
		{"no key", request{method: "DELETE", path: "/v1/admin/tenants/acme/budget"}, 401, "missing API key"},
		{"wrong key", request{method: "GET", path: "/v1/admin/tenants/acme/budget", header: map[string]string{"X-Api-Key": "not-a-key-at-all-0000"}}, 401, "invalid API key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := e.send(t, tc.r)
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %s, want %d naming %q", tc.r.method, tc.r.path, code, body, tc.status, tc.want)
			}
		})
	}
	if len(orch.budgets) != 0 {
		t.Fatalf("refused requests stored budgets: %v", orch.budgets)
	}
	// gRPC: a tenant key is PermissionDenied, no key Unauthenticated.
	_, err := e.client.SetBudget(withKey(ctx, keyAcme), &baagentv1.GatewayServiceSetBudgetRequest{Tenant: "acme", Budget: &baagentv1.Budget{}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("SetBudget with a tenant key: %v", err)
	}
	if _, err := e.client.GetBudget(ctx, &baagentv1.GatewayServiceGetBudgetRequest{Tenant: "acme"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetBudget without a key: %v", err)
	}
	_, err = e.client.SetBudget(withKey(ctx, keyAdmin), &baagentv1.GatewayServiceSetBudgetRequest{Tenant: "acme"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "budget") {
		t.Errorf("SetBudget without a budget: %v", err)
	}
	_, err = e.client.SetBudget(withKey(ctx, keyAdmin), &baagentv1.GatewayServiceSetBudgetRequest{Tenant: "acme", Clear: true, Budget: &baagentv1.Budget{}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("SetBudget with clear and a budget: %v", err)
	}
}

func TestAdminAPIDisabledWithoutAdminKeys(t *testing.T) {
	e, _ := newBudgetEnv(t, Options{AdminAPIKeys: []string{}})
	code, body, _ := e.send(t, request{method: "GET", path: "/v1/admin/tenants/acme/budget", header: map[string]string{"X-Api-Key": keyAcme}})
	if code != http.StatusForbidden || !strings.Contains(body, "admin API is disabled") {
		t.Fatalf("GET budget without admin keys = %d %s", code, body)
	}
}

func TestAdminKeySettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admin-keys")
	if err := os.WriteFile(file, []byte("# operators\nfile-admin-key-0123456789\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Settings{adminAPIKeys: "flag-admin-key-0123456789, ", adminKeysFile: file}
	if err := s.validateAdminKeys(); err != nil {
		t.Fatal(err)
	}
	if len(s.AdminAPIKeys) != 2 || s.Options().AdminAPIKeys[1] != "file-admin-key-0123456789" {
		t.Fatalf("AdminAPIKeys = %v", s.AdminAPIKeys)
	}
	for _, bad := range []Settings{
		{adminAPIKeys: "short"},
		{adminAPIKeys: keyAcme, APIKeys: map[string]string{keyAcme: "acme"}},
		{adminKeysFile: filepath.Join(t.TempDir(), "missing")},
	} {
		if err := bad.validateAdminKeys(); err == nil || !strings.Contains(err.Error(), "admin-api-keys") {
			t.Errorf("settings %+v: %v", bad, err)
		}
	}
	// An admin key that is also a tenant key is refused at startup.
	srv := New(Options{APIKeys: map[string]string{keyAcme: "acme"}, AdminAPIKeys: []string{keyAcme}})
	if err := srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "also a tenant API key") {
		t.Errorf("Run with an admin key that is a tenant key: %v", err)
	}
}

// TestBudgetRefusalIs429: the orchestrator's refusal of a run over budget
// (ResourceExhausted with QuotaFailure) reaches gRPC clients unchanged and
// HTTP clients as 429 naming the limit.
func TestBudgetRefusalIs429(t *testing.T) {
	ctx := testCtx(t)
	e, orch := newBudgetEnv(t, Options{})
	refusal, err := status.New(codes.ResourceExhausted, "budget exceeded: the usd_per_day limit of tenant acme is reached: $1 spent today (UTC) of $1").
		WithDetails(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:acme", Description: "usd_per_day: $1 spent today (UTC) of $1"}}})
	if err != nil {
		t.Fatal(err)
	}
	orch.fakeOrchestrator.mu.Lock()
	orch.fail = func(method string) error {
		if method == "StartRun" {
			return refusal.Err()
		}
		return nil
	}
	orch.fakeOrchestrator.mu.Unlock()
	_, err = e.client.StartRun(withKey(ctx, keyAcme), &baagentv1.StartRunRequest{Spec: &baagentv1.RunSpec{Input: "hi"}})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 {
		t.Fatalf("gRPC StartRun = %v (details %v)", err, st.Details())
	}
	if qf, ok := st.Details()[0].(*errdetails.QuotaFailure); !ok || qf.GetViolations()[0].GetSubject() != "tenant:acme" {
		t.Fatalf("details %v", st.Details())
	}
	code, body, _ := e.send(t, request{method: "POST", path: "/v1/runs", body: `{"spec":{"input":"hi"}}`,
		header: map[string]string{"Authorization": "Bearer " + keyAcme, "Content-Type": "application/json"}})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "usd_per_day") || !strings.Contains(body, "RESOURCE_EXHAUSTED") {
		t.Fatalf("POST /v1/runs over budget = %d %s", code, body)
	}
}
