package main

import (
	"encoding/json"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

const (
	budgetTenantKey = "budget-tenant-key-0123456789"
	budgetAdminKey  = "budget-admin-key-0123456789"
)

// TestBudgetCommandsEndToEnd runs the whole suite (-target=all) with a
// tenant key and an admin key: the admin sets a budget, the tenant's run
// is refused naming the limit, usage shows the budget, and a tenant key
// cannot use the admin commands.
func TestBudgetCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	a := startApp(t, "../../examples/scenarios", "-api-keys="+budgetTenantKey+"=acme", "-admin-api-keys="+budgetAdminKey)
	addr := "--addr=" + a.Addr("gateway").String()
	admin := "--admin-key=" + budgetAdminKey
	tenant := "--api-key=" + budgetTenantKey

	code, stdout, stderr := ctl(t, addr, "budget", "set", "--tenant", "acme", "--usd-per-day", "0", "--max-steps-per-run", "7", admin)
	if code != 0 || !strings.Contains(stdout, "tenant acme (budget: admin API)") || !strings.Contains(stdout, "max_steps_per_run  7") {
		t.Fatalf("budget set: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = ctl(t, addr, "ask", "How many rows are there?", tenant)
	if code != 1 || !strings.Contains(stderr, "usd_per_day") || !strings.Contains(stderr, "ResourceExhausted") {
		t.Fatalf("ask over budget: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = ctl(t, addr, "usage", tenant, "--json")
	if code != 0 {
		t.Fatalf("usage: exit %d %s", code, stderr)
	}
	var u struct {
		Usage struct {
			Tenant string `json:"tenant"`
			Source string `json:"source"`
			Day    struct {
				Period string `json:"period"`
			} `json:"day"`
			Budget struct {
				MaxStepsPerRun int `json:"max_steps_per_run"`
			} `json:"budget"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(stdout), &u); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, stdout)
	}
	if u.Usage.Tenant != "acme" || u.Usage.Source != "BUDGET_SOURCE_API" || u.Usage.Budget.MaxStepsPerRun != 7 || len(u.Usage.Day.Period) != 10 {
		t.Fatalf("usage = %s", stdout)
	}
	if code, stdout, _ = ctl(t, addr, "usage", tenant); code != 0 || !strings.Contains(stdout, "PERIOD") || !strings.Contains(stdout, "per run: 7 steps") ||
		strings.Contains(stdout, "DAY") {
		t.Fatalf("usage table: exit %d\n%s", code, stdout)
	}
	// --days adds the daily table: a header and one line a day, today last.
	code, stdout, stderr = ctl(t, addr, "usage", tenant, "--days", "3")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) < 4 || !strings.HasPrefix(lines[len(lines)-4], "DAY") || !strings.HasPrefix(lines[len(lines)-1], u.Usage.Day.Period) {
		t.Fatalf("usage --days 3: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr = ctl(t, addr, "usage", tenant, "--days", "63"); code != 2 || !strings.Contains(stderr, "--days") {
		t.Fatalf("usage --days 63: exit %d %s", code, stderr)
	}
	// A tenant key is not an admin key.
	if code, _, stderr = ctl(t, addr, "budget", "get", "--tenant", "acme", "--admin-key="+budgetTenantKey); code != 1 || !strings.Contains(stderr, "PermissionDenied") {
		t.Fatalf("budget get with a tenant key: exit %d %s", code, stderr)
	}
	if code, _, stderr = ctl(t, addr, "budget", "set", "--tenant", "acme", "--usd-per-day", "-1", admin); code != 1 || !strings.Contains(stderr, "budget.usd_per_day") {
		t.Fatalf("budget set negative: exit %d %s", code, stderr)
	}
	if code, stdout, stderr = ctl(t, addr, "budget", "clear", "--tenant", "acme", admin); code != 0 || !strings.Contains(stdout, "(budget: none)") {
		t.Fatalf("budget clear: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr = ctl(t, addr, "budget", "get", admin); code != 2 || !strings.Contains(stderr, "--tenant") {
		t.Fatalf("budget get without --tenant: exit %d %s", code, stderr)
	}
	code, stdout, _ = ctl(t, "budget", "key-id", tenant)
	if code != 0 || strings.TrimSpace(stdout) != keyID(budgetTenantKey) || len(strings.TrimSpace(stdout)) != 8 {
		t.Fatalf("budget key-id: exit %d %q", code, stdout)
	}
}

func TestPrintHistory(t *testing.T) {
	var b strings.Builder
	if err := printHistory(&b, nil); err != nil || b.Len() != 0 {
		t.Fatalf("no history printed %q, %v", b.String(), err)
	}
	days := []*baagentv1.UsageWindow{
		{Period: "2026-12-03"},
		{Period: "2026-12-04", CostUsd: 0.125, InputTokens: 1000, OutputTokens: 200, UnpricedTokens: 50, ModelCalls: 3},
	}
	if err := printHistory(&b, days); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "DAY COST INPUT OUTPUT TOKENS UNPRICED CALLS" ||
		strings.Join(strings.Fields(lines[1]), " ") != "2026-12-03 $0 0 0 0 0 0" ||
		strings.Join(strings.Fields(lines[2]), " ") != "2026-12-04 $0.125 1000 200 1200 50 3" {
		t.Fatalf("history table:\n%s", b.String())
	}
}
