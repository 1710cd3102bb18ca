package contextsvc

import (
	"context"
	"slices"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Importance by age: LOW messages are compressed first when more
// than 3 rounds old, MEDIUM ones when more than 5.
const (
	lowRoundsAge    = 3
	mediumRoundsAge = 5
)

// planner decides, unit by unit, what of the history goes into a window. All
// figures are raw counts (before the model's safety margin); targets were
// converted from the budget.
type planner struct {
	ctx   context.Context
	count func(context.Context, []countable) ([]int64, error)
	units []*unit

	total      int64 // raw count of the whole window as planned
	soft, hard int64 // compress down to soft; the window must fit hard
	lastRound  int

	// summaries
	summary    func(*segment) (string, bool)
	minSegment int64
	wanted     []*segment // segments whose summary is not ready
	summarized int        // segments served from summaries

	prunedCount int
	prunedRaw   int64
}

func (p *planner) over(target int64) bool { return p.total > target }

// setItem changes an item's form and the running totals.
func (p *planner) setItem(u *unit, it *item, form itemForm, c countable, raw int64) {
	p.total += raw - it.raw
	u.raw += raw - it.raw
	it.form, it.msg, it.raw = form, c, raw
}

func (p *planner) setUnit(u *unit, state unitState, raw int64) {
	p.total += raw - u.raw
	u.raw = raw
	u.state = state
}

// run compresses the window as strategy says: tool outputs are pruned first
// (when pruneOutputs), then the strategy's passes run in order while the
// window is over the soft target.
func (p *planner) run(strategy baagentv1.CompressionStrategy, pruneOutputs bool) error {
	if pruneOutputs {
		if err := p.pruneToolOutputs(); err != nil {
			return err
		}
	}
	for _, ps := range strategyPasses[strategy] {
		if !p.over(p.soft) {
			break
		}
		if err := ps.apply(p); err != nil {
			return err
		}
	}
	return nil
}

// A pass is one step of a compression strategy. It compresses the units of
// its zone, oldest first, until the window is at most its target, and does
// nothing when the window is there already. CRITICAL messages and skill
// instructions are never touched. Each pass lives in pass_<name>.go.
type pass interface {
	apply(p *planner) error
}

// strategyPasses are the passes of each strategy, in the order they run.
// They are values built once: running a strategy allocates nothing for them.
var strategyPasses = func() map[baagentv1.CompressionStrategy][]pass {
	const (
		low    = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW
		medium = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM
		high   = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_HIGH
	)
	olderExtract := []pass{
		extractPass{older, softTarget, importanceOlderThan(low, lowRoundsAge)},
		extractPass{older, softTarget, importanceOlderThan(medium, mediumRoundsAge)},
		extractPass{older, softTarget, importanceIn(low, medium)},
		extractPass{older, softTarget, importanceIn(high)},
	}
	// What the budget forces when the strategy's own passes were not enough:
	// older compressed content goes, then the recent zone is compressed.
	emergency := []pass{
		extractPass{older, hardTarget, importanceIn(low, medium, high)},
		dropPass{older, hardTarget},
		omitPass{older, hardTarget},
		extractPass{recent, hardTarget, importanceIn(low, medium)},
		extractPass{recent, hardTarget, importanceIn(high)},
		dropPass{recent, hardTarget},
		omitPass{recent, hardTarget},
	}
	return map[baagentv1.CompressionStrategy][]pass{
		baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:  slices.Concat([]pass{dropPass{older, softTarget}}, emergency),
		baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:   slices.Concat(olderExtract, emergency),
		baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE: slices.Concat([]pass{summarizePass{softTarget}}, olderExtract, emergency),
	}
}()

// target is the count a pass compresses down to.
type target uint8

const (
	softTarget target = iota // the strategy's goal: below the trigger, within the budget split
	hardTarget               // the input budget, which the window must fit
)

func (p *planner) limit(t target) int64 {
	if t == hardTarget {
		return p.hard
	}
	return p.soft
}

// zone selects units by recency.
type zone uint8

const (
	older zone = iota
	recent
)

func (p *planner) inZone(u *unit, z zone) bool { return u.recent == (z == recent) }

// compressible reports members a pass may touch at all: never CRITICAL
// messages or skill instructions.
func compressible(it *item) bool { return !it.critical() && !protectedMsg(it.src.msg) }

func srcs(u *unit) []*storedMsg {
	out := make([]*storedMsg, len(u.items))
	for i, it := range u.items {
		out[i] = it.src
	}
	return out
}

// markRecent puts the newest units whose raw count fits share into the recent
// zone; the newest unit is always recent.
func (p *planner) markRecent(share int64) {
	var sum int64
	for i := len(p.units) - 1; i >= 0; i-- {
		u := p.units[i]
		if i < len(p.units)-1 && sum+u.raw > share {
			return
		}
		sum += u.raw
		u.recent = true
	}
}
