package contextsvc

import (
	"math"
	"math/big"
	"strconv"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Budget split (docs/concepts/context-compression.md#the-budget).
const (
	defaultSystemPct  = 0.10
	defaultHistoryPct = 0.50
	defaultRecentPct  = 0.25
	defaultOutputPct  = 0.15
	defaultTriggerPct = 0.80
	// outputTokenMax caps the part of a model's maximum output the reserve
	// must hold.
	outputTokenMax = 8192
)

// windowBudget is the token budget of one window, in tokens as the tokens service
// counts them (with the model's safety margin).
type windowBudget struct {
	contextLength int64 // the model's context length
	outputReserve int64 // kept free for the reply
	input         int64 // contextLength - outputReserve: the window must fit
	trigger       int64 // compression starts at this many input tokens
	systemShare   int64
	historyShare  int64
	recentShare   int64
}

// resolveBudget applies the request's overrides to the model's metadata.
// The output reserve is output_reserve_pct of the context length, raised to
// the model's maximum output (capped at OUTPUT_TOKEN_MAX) when that is larger,
// so that a full-length reply always has room.
func resolveBudget(meta *baagentv1.ModelMetadata, b *baagentv1.BudgetOptions) windowBudget {
	ctxLen := meta.GetContextLength()
	if v := b.GetMaxContextTokens(); v > 0 {
		ctxLen = v
	}
	maxOut := meta.GetMaxOutputTokens()
	if v := b.GetMaxOutputTokens(); v > 0 {
		maxOut = v
	}
	if b == nil {
		b = &baagentv1.BudgetOptions{}
	}
	pct := func(p *float64, def float64) float64 {
		if p != nil {
			return *p
		}
		return def
	}
	share := func(p float64) int64 { return int64(math.Floor(float64(ctxLen) * p)) }
	reserve := max(share(pct(b.OutputReservePct, defaultOutputPct)), min(maxOut, outputTokenMax))
	reserve = min(reserve, ctxLen-1)
	input := ctxLen - reserve
	return windowBudget{
		contextLength: ctxLen,
		outputReserve: reserve,
		input:         input,
		trigger:       int64(math.Floor(float64(input) * pct(b.CompressionTriggerPct, defaultTriggerPct))),
		systemShare:   share(pct(b.SystemBudgetPct, defaultSystemPct)),
		historyShare:  share(pct(b.HistoryBudgetPct, defaultHistoryPct)),
		recentShare:   share(pct(b.RecentBudgetPct, defaultRecentPct)),
	}
}

// marginer applies a safety margin (ceil(raw × margin), exact, as the tokens
// service does) with integer arithmetic, and inverts it.
type marginer struct {
	num, den int64
}

func newMarginer(margin float64) marginer {
	if !(margin > 1) {
		return marginer{1, 1}
	}
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(margin, 'g', -1, 64))
	if !ok || !r.Num().IsInt64() || !r.Denom().IsInt64() || r.Num().Int64() > 1<<20 {
		// An unusual margin: fall back to a rational close above it.
		return marginer{int64(math.Ceil(margin * 1e6)), 1e6}
	}
	return marginer{r.Num().Int64(), r.Denom().Int64()}
}

// apply returns ceil(raw × margin).
func (m marginer) apply(raw int64) int64 {
	if raw <= 0 || m.num == m.den {
		return raw
	}
	return (raw*m.num + m.den - 1) / m.den
}

// rawFor returns the largest raw count whose margin-applied count is at
// most tokens.
func (m marginer) rawFor(tokens int64) int64 {
	if tokens <= 0 {
		return 0
	}
	return tokens * m.den / m.num
}
