// Package pricing is what one model call costs: the USD price of its usage
// under a model's list prices (ModelMetadata, as the tokens service reports
// them). It is pure, so the orchestrator's accounting and anything that must
// reserve or settle a cost ahead of time compute the same number.
//
// The rule (docs/concepts/tokens.md#prices):
//
//	cost = (prompt − cached)·input + cached·cached_input + completion·output
//
// with every price in USD per million tokens. A cost is never undercounted:
// a model with no input or output price, or a prompt longer than the
// price's tier limit (price_max_prompt_tokens), has an unknown cost rather
// than a cheaper one, and a model with no cached-input price bills cached
// prompt tokens at the full input price.
package pricing

import (
	"math"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// perMillion is the unit of every price: USD per 1M tokens.
const perMillion = 1e6

// Tokens is a model call's usage split the way it is billed.
type Tokens struct {
	// Input is the prompt tokens not served from the prompt cache.
	Input int64
	// CachedInput is the prompt tokens served from the prompt cache.
	CachedInput int64
	// Output is the completion tokens.
	Output int64
}

// Split divides u into the billed kinds. Counts below zero are taken as zero
// and cached tokens are capped at the prompt, so the three kinds always add up
// to prompt + completion (of the non-negative counts). A nil u is no usage.
func Split(u *baagentv1.Usage) Tokens {
	prompt := max(u.GetPromptTokens(), 0)
	cached := min(max(u.GetCachedPromptTokens(), 0), prompt)
	return Tokens{Input: prompt - cached, CachedInput: cached, Output: max(u.GetCompletionTokens(), 0)}
}

// Priced reports whether meta carries a usable price: an input and an output
// price, each a finite non-negative number, and a cached-input price that is
// either absent or such a number.
func Priced(meta *baagentv1.ModelMetadata) bool {
	if meta == nil || meta.InputCostPer_1M == nil || meta.OutputCostPer_1M == nil {
		return false
	}
	if !valid(meta.GetInputCostPer_1M()) || !valid(meta.GetOutputCostPer_1M()) {
		return false
	}
	return meta.CachedInputCostPer_1M == nil || valid(meta.GetCachedInputCostPer_1M())
}

// Cost is the USD cost of a model call with usage u under meta's prices, and
// whether it is known. It is unknown (0, false) when meta is not [Priced] or
// when the prompt is longer than meta's price_max_prompt_tokens (a dearer
// tier whose price is not carried). A nil u costs nothing.
func Cost(meta *baagentv1.ModelMetadata, u *baagentv1.Usage) (usd float64, known bool) {
	if !Priced(meta) {
		return 0, false
	}
	t := Split(u)
	if limit := meta.GetPriceMaxPromptTokens(); limit > 0 && t.Input+t.CachedInput > limit {
		return 0, false
	}
	input := meta.GetInputCostPer_1M()
	cached := input
	if meta.CachedInputCostPer_1M != nil {
		cached = meta.GetCachedInputCostPer_1M()
	}
	usd = (float64(t.Input)*input + float64(t.CachedInput)*cached + float64(t.Output)*meta.GetOutputCostPer_1M()) / perMillion
	if !valid(usd) {
		// Only reachable with token counts near the int64 range times
		// prices near the float64 range: not a cost anyone is billed.
		return 0, false
	}
	return usd, true
}

// valid reports whether p is a finite non-negative number.
func valid(p float64) bool { return p >= 0 && !math.IsInf(p, 1) }
