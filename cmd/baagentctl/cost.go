package main

import (
	"fmt"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// costUpdateLine renders a cost_update for `ask`: the call's tokens (cached
// ones too) and its cost, "cost unknown" only when the call had no price,
// and the run's priced total so far.
func costUpdateLine(c *baagentv1.CostUpdatePayload) string {
	in := fmt.Sprintf("%d tokens in", c.GetUsage().GetPromptTokens())
	if n := c.GetCachedInputTokens(); n > 0 {
		in += fmt.Sprintf(" (%d cached)", n)
	}
	tokens := fmt.Sprintf("%s, %d out", in, c.GetUsage().GetCompletionTokens())
	// A server from before price_known reported a priced call only
	// through a positive cost.
	known := c.GetPriceKnown() || c.GetStepCostUsd() > 0
	switch {
	case known && c.GetPriceAsOf() != "":
		return fmt.Sprintf("%s; $%.6f, $%.6f so far (prices of %s)", tokens, c.GetStepCostUsd(), c.GetTotalCostUsd(), c.GetPriceAsOf())
	case known:
		return fmt.Sprintf("%s; $%.6f, $%.6f so far", tokens, c.GetStepCostUsd(), c.GetTotalCostUsd())
	case c.GetTotalCostUsd() > 0:
		return fmt.Sprintf("%s; cost unknown, $%.6f so far for priced calls", tokens, c.GetTotalCostUsd())
	default:
		return tokens + "; cost unknown"
	}
}

// cachedPrice is the cached-input price of `tokens info`: the input price
// stands in when the model has none of its own.
func cachedPrice(md *baagentv1.ModelMetadata) string {
	switch {
	case md.CachedInputCostPer_1M != nil:
		return price(md.CachedInputCostPer_1M)
	case md.InputCostPer_1M != nil:
		return "as input"
	default:
		return "unknown"
	}
}

// pricedAs says under which name and date a model is priced, and up to
// which prompt size: "gpt-4o, prices of 2024-10-01".
func pricedAs(md *baagentv1.ModelMetadata) string {
	if md.InputCostPer_1M == nil && md.OutputCostPer_1M == nil {
		return "no price"
	}
	s := md.GetName()
	if d := md.GetPriceAsOf(); d != "" {
		s += ", prices of " + d
	}
	if n := md.GetPriceMaxPromptTokens(); n > 0 {
		s += fmt.Sprintf(", prompts up to %d tokens (longer: cost unknown)", n)
	}
	return s
}

// priceColumns are the price columns of `tokens models`: input, cached
// input and output USD per 1M tokens and the price's date, "-" where
// unknown.
func priceColumns(md *baagentv1.ModelMetadata) string {
	if md.InputCostPer_1M == nil && md.OutputCostPer_1M == nil {
		return "-\t-\t-\t-"
	}
	dash := func(s string) string {
		if s == "" || s == "unknown" {
			return "-"
		}
		return s
	}
	cached := cachedPrice(md)
	if cached == "as input" {
		cached = "-"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s", dash(price(md.InputCostPer_1M)), dash(cached), dash(price(md.OutputCostPer_1M)), dash(md.GetPriceAsOf()))
}
