package browser

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// overviewShots are the tenant overview's screenshots (console_overview.mjs).
var overviewShots = []string{"overview.png", "overview-tablet.png"}

// overviewQuestion is a shipped scenario's question (revenue-by-category:
// a sql_query step, then the answer): two model steps.
const overviewQuestion = "Which product category had the highest revenue last quarter?"

// ovRunUntil runs overviewQuestion until a run ends in want (at most ten
// runs) and returns that run's id.
func ovRunUntil(ctx context.Context, t *testing.T, s *pagesSuite, want string) string {
	t.Helper()
	var states []string
	for range 10 {
		id, _, state := s.run(ctx, t, map[string]any{"input": overviewQuestion})
		if state == want {
			return id
		}
		states = append(states, id+" "+state)
	}
	t.Fatalf("no run ended %s: %v", want, states)
	return ""
}

// seedOverview gives the suite's tenant a run that fails (stopped by a
// per-run step limit of one, set through the admin API) and one that
// completes, then a budget whose daily token limit is about four times
// what the day has used, so that the page's meter shows a visible share.
// The budget is cleared when the subtest ends, so the later pages run
// unlimited.
func seedOverview(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	var who struct {
		Tenant string `json:"tenant"`
	}
	s.json(ctx, t, "GET", "/v1/whoami", "", nil, &who)
	if who.Tenant == "" {
		t.Fatal("whoami names no tenant")
	}
	budgetURL := "/v1/admin/tenants/" + who.Tenant + "/budget"
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if code, b := s.do(cctx, t, "DELETE", budgetURL, pagesAdminKey, nil); code != http.StatusOK {
			t.Errorf("clearing the overview's budget: %d %s", code, b)
		}
	})

	// Each orchestrator caches a budget for up to two seconds: a run
	// started just after a change may still see the previous one, so runs
	// are started until one ends as wanted.
	s.json(ctx, t, "PUT", budgetURL, pagesAdminKey, map[string]any{"max_steps_per_run": 1}, nil)
	failed := ovRunUntil(ctx, t, s, "RUN_STATE_FAILED")
	s.json(ctx, t, "PUT", budgetURL, pagesAdminKey, map[string]any{"usd_per_day": 5, "usd_per_month": 100}, nil)
	ok := ovRunUntil(ctx, t, s, "RUN_STATE_COMPLETED")

	var usage struct {
		Usage struct {
			Day struct {
				Input  string `json:"input_tokens"`
				Output string `json:"output_tokens"`
			} `json:"day"`
		} `json:"usage"`
	}
	s.json(ctx, t, "GET", "/v1/usage", "", nil, &usage)
	in, _ := strconv.ParseInt(usage.Usage.Day.Input, 10, 64)
	out, _ := strconv.ParseInt(usage.Usage.Day.Output, 10, 64)
	if in+out == 0 {
		t.Fatalf("no tokens counted today after two runs: %+v", usage)
	}
	tokensPerDay := ((in+out)*4/1000 + 1) * 1000
	s.json(ctx, t, "PUT", budgetURL, pagesAdminKey, map[string]any{
		"usd_per_day": 5, "usd_per_month": 100, "tokens_per_day": tokensPerDay, "max_steps_per_run": 25,
	}, nil)
	t.Logf("overview: tenant %s, failed run %s, completed run %s, %d tokens today, tokens_per_day %d", who.Tenant, failed, ok, in+out, tokensPerDay)
	return []string{
		"OVERVIEW_TENANT=" + who.Tenant,
		"OVERVIEW_FAILED_RUN=" + failed,
		"OVERVIEW_OK_RUN=" + ok,
		fmt.Sprintf("OVERVIEW_TOKENS_PER_DAY=%d", tokensPerDay),
	}
}
