package contextsvc

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Seed 000 BasicContextManager: LOW messages are compressed first when more
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

// run applies a strategy's passes.
func (p *planner) run(strategy baagentv1.CompressionStrategy, pruneOutputs bool) error {
	if pruneOutputs {
		if err := p.prune(); err != nil {
			return err
		}
	}
	const (
		low    = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_LOW
		medium = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM
		high   = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_HIGH
	)
	olderExtract := []func() error{
		func() error { return p.extractPass(older, p.soft, importanceOlderThan(low, lowRoundsAge, p.lastRound)) },
		func() error {
			return p.extractPass(older, p.soft, importanceOlderThan(medium, mediumRoundsAge, p.lastRound))
		},
		func() error { return p.extractPass(older, p.soft, importanceIn(low, medium)) },
		func() error { return p.extractPass(older, p.soft, importanceIn(high)) },
	}
	// What the budget forces when the strategy's own passes were not enough:
	// older compressed content goes, then the recent zone is compressed.
	// CRITICAL messages and skill instructions are never touched.
	emergency := []func() error{
		func() error { return p.extractPass(older, p.hard, importanceIn(low, medium, high)) },
		func() error { return p.dropPass(older, p.hard) },
		func() error { return p.omitPass(older, p.hard) },
		func() error { return p.extractPass(recent, p.hard, importanceIn(low, medium)) },
		func() error { return p.extractPass(recent, p.hard, importanceIn(high)) },
		func() error { return p.dropPass(recent, p.hard) },
		func() error { return p.omitPass(recent, p.hard) },
	}
	var passes []func() error
	switch strategy {
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_TRUNCATE:
		passes = append([]func() error{func() error { return p.dropPass(older, p.soft) }}, emergency...)
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_EXTRACT:
		passes = append(olderExtract, emergency...)
	case baagentv1.CompressionStrategy_COMPRESSION_STRATEGY_SUMMARIZE:
		passes = append([]func() error{func() error { return p.summarizePass(p.soft) }}, olderExtract...)
		passes = append(passes, emergency...)
	}
	for _, pass := range passes {
		if !p.over(p.soft) {
			break
		}
		if err := pass(); err != nil {
			return err
		}
	}
	return nil
}
