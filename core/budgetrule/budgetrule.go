// Package budgetrule is the validity rule of a budget (the Budget message)
// and of an API key id, applied alike by the gateway's edge validation,
// the orchestrator and the budgets file.
package budgetrule

import (
	"fmt"
	"math"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Names of the limits, as in the Budget message.
const (
	USDPerDay      = "usd_per_day"
	USDPerMonth    = "usd_per_month"
	TokensPerDay   = "tokens_per_day"
	MaxStepsPerRun = "max_steps_per_run"
	MaxUSDPerRun   = "max_usd_per_run"
)

// Bounds of a limit's value: far above any real budget, low enough that
// sums of them cannot overflow integer nano-dollars.
const (
	MaxUSD      = 1e9
	MaxTokens   = 1e15
	MaxRunSteps = 100000
)

// KeyIDLen is the length of an API key id: the first 8 hex digits of the
// key's SHA-256.
const KeyIDLen = 8

// Violation is one invalid field of a budget.
type Violation struct {
	Field       string // the limit's name
	Description string
}

// Check returns the invalid fields of b (none for nil): amounts of USD must be finite,
// 0..MaxUSD; tokens 0..MaxTokens; steps 1..MaxRunSteps.
func Check(b *baagentv1.Budget) []Violation {
	if b == nil {
		return nil
	}
	var out []Violation
	usd := func(name string, v *float64) {
		if v == nil {
			return
		}
		switch {
		case math.IsNaN(*v) || math.IsInf(*v, 0):
			out = append(out, Violation{name, "must be a finite number of USD"})
		case *v < 0:
			out = append(out, Violation{name, fmt.Sprintf("must not be negative, got %v", *v)})
		case *v > MaxUSD:
			out = append(out, Violation{name, fmt.Sprintf("must be at most %v USD, got %v", MaxUSD, *v)})
		}
	}
	usd(USDPerDay, b.UsdPerDay)
	usd(USDPerMonth, b.UsdPerMonth)
	usd(MaxUSDPerRun, b.MaxUsdPerRun)
	if v := b.TokensPerDay; v != nil && (*v < 0 || *v > MaxTokens) {
		out = append(out, Violation{TokensPerDay, fmt.Sprintf("want 0 to %d tokens, got %d", int64(MaxTokens), *v)})
	}
	if v := b.MaxStepsPerRun; v != nil && (*v < 1 || *v > MaxRunSteps) {
		out = append(out, Violation{MaxStepsPerRun, fmt.Sprintf("want 1 to %d steps, got %d", MaxRunSteps, *v)})
	}
	return out
}

// CheckKeyID reports whether id is a well-formed API key id (8 lowercase
// hex digits).
func CheckKeyID(id string) error {
	ok := len(id) == KeyIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("must be %d lowercase hex digits (the start of the key's SHA-256)", KeyIDLen)
	}
	return nil
}
