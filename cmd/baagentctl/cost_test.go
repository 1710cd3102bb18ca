package main

import (
	"regexp"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestCostUpdateLine(t *testing.T) {
	t.Parallel()
	u := &baagentv1.Usage{PromptTokens: 1000, CompletionTokens: 100, CachedPromptTokens: 400}
	for _, c := range []struct {
		cu   *baagentv1.CostUpdatePayload
		want string
	}{
		{&baagentv1.CostUpdatePayload{Usage: u, CachedInputTokens: 400, StepCostUsd: 0.003, TotalCostUsd: 0.004, PriceKnown: true, PriceAsOf: "2024-10-01"},
			"1000 tokens in (400 cached), 100 out; $0.003000, $0.004000 so far (prices of 2024-10-01)"},
		{&baagentv1.CostUpdatePayload{Usage: u, StepCostUsd: 0, TotalCostUsd: 0, PriceKnown: true},
			"1000 tokens in, 100 out; $0.000000, $0.000000 so far"},
		// A server from before price_known.
		{&baagentv1.CostUpdatePayload{Usage: u, StepCostUsd: 0.5, TotalCostUsd: 0.5},
			"1000 tokens in, 100 out; $0.500000, $0.500000 so far"},
		{&baagentv1.CostUpdatePayload{Usage: u, TotalCostUsd: 0.25},
			"1000 tokens in, 100 out; cost unknown, $0.250000 so far for priced calls"},
		{&baagentv1.CostUpdatePayload{Usage: u},
			"1000 tokens in, 100 out; cost unknown"},
	} {
		if got := costUpdateLine(c.cu); got != c.want {
			t.Errorf("costUpdateLine(%v)\n got %q\nwant %q", c.cu, got, c.want)
		}
	}
}

func TestTokensInfoShowsPrices(t *testing.T) {
	t.Parallel()

	addr := startTokens(t)
	code, out, errOut := ctlStdin(t, "", addr, "tokens", "info", "gemini-2.5-pro")
	if code != 0 {
		t.Fatalf("info: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"input $/1M:", "1.25", "output $/1M:", "cached input $/1M:", "0.31",
		"priced as:", "gemini-2.5-pro, prices of ", "prompts up to 200000 tokens (longer: cost unknown)"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = ctlStdin(t, "", addr, "tokens", "models")
	if code != 0 || !strings.Contains(out, "PRICE AS OF") || !regexp.MustCompile(`(?m)^deepseek-reasoner .* 0\.28 +0\.028 +0\.42 +20\d\d-\d\d-\d\d$`).MatchString(out) {
		t.Errorf("models: exit %d\n%s", code, out)
	}
	code, out, _ = ctlStdin(t, "", addr, "tokens", "info", "house-model")
	if code != 0 || !strings.Contains(out, "priced as:") || !strings.Contains(out, "no price") {
		t.Errorf("unpriced model: exit %d\n%s", code, out)
	}
}
