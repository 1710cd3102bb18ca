package contextsvc

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Constants for pruning old tool outputs (docs/concepts/context-compression.md).
const (
	// pruneMinimumTokens: prune only when at least this many tokens go.
	pruneMinimumTokens = 20_000
	// pruneProtectTokens: the newest tool outputs up to this many tokens stay.
	pruneProtectTokens = 40_000
	// pruneProtectTurns: tool outputs of the last user turns stay.
	pruneProtectTurns = 2
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

// segment is a run of consecutive compressible units summarized together.
type segment struct {
	units []*unit
	msgs  []*storedMsg
	raw   int64
	key   contentHash
	msg   countable // the summary message once ready
	n     int64
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

// prune prunes old tool outputs: walking back from the newest
// message, tool outputs of the last two user turns and the newest 40K
// tool-output tokens are protected; older ones are pruned, but only when at
// least 20K tokens would go. Skill instructions and CRITICAL outputs (errors)
// are never pruned; a stored summary ends the walk (what precedes it was
// compacted already).
func (p *planner) prune() error {
	var cands []*item
	var owners []*unit
	turns := 0
	var seen, pruned int64
walk:
	for ui := len(p.units) - 1; ui >= 0; ui-- {
		u := p.units[ui]
		for ii := len(u.items) - 1; ii >= 0; ii-- {
			it := u.items[ii]
			m := it.src.msg
			if m.GetRole() == baagentv1.Role_ROLE_USER {
				turns++
			}
			if turns < pruneProtectTurns {
				continue
			}
			if m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SUMMARY {
				break walk
			}
			if m.GetRole() != baagentv1.Role_ROLE_TOOL || protectedMsg(m) || it.critical() || it.form != formVerbatim {
				continue
			}
			seen += it.raw
			if seen > pruneProtectTokens {
				pruned += it.raw
				cands = append(cands, it)
				owners = append(owners, u)
			}
		}
	}
	if pruned <= pruneMinimumTokens {
		return nil
	}
	forms := make([]countable, len(cands))
	for i, it := range cands {
		forms[i] = it.src.forms().pruned
	}
	raw, err := p.count(p.ctx, forms)
	if err != nil {
		return err
	}
	for i, it := range cands {
		if raw[i] >= it.raw {
			continue
		}
		p.prunedRaw += it.raw - raw[i]
		p.prunedCount++
		p.setItem(owners[i], it, formPruned, forms[i], raw[i])
	}
	return nil
}

// zone selects units by recency.
type zone uint8

const (
	older zone = iota
	recent
)

func (p *planner) inZone(u *unit, z zone) bool { return u.recent == (z == recent) }

// memberPred selects the members a pass compresses.
type memberPred func(u *unit, it *item) bool

func importanceOlderThan(imp baagentv1.MessageImportance, rounds int, lastRound int) memberPred {
	return func(u *unit, it *item) bool {
		return it.importance() == imp && lastRound-u.round > rounds
	}
}

func importanceIn(imps ...baagentv1.MessageImportance) memberPred {
	return func(_ *unit, it *item) bool {
		for _, imp := range imps {
			if it.importance() == imp {
				return true
			}
		}
		return false
	}
}

// compressible reports members a pass may touch at all: never CRITICAL
// messages or skill instructions.
func compressible(it *item) bool { return !it.critical() && !protectedMsg(it.src.msg) }

// extractPass compresses selected members of units in zone, oldest first,
// until the window is at most target: each member becomes its extract, and
// a unit with nothing CRITICAL or protected whose members are all compressed
// collapses into one extract message.
func (p *planner) extractPass(z zone, target int64, pred memberPred) error {
	if !p.over(target) {
		return nil
	}
	type cand struct {
		u        *unit
		members  []*item
		forms    []countable
		raws     []int64
		collapse bool
		compact  countable
		compN    int64
	}
	var cands []*cand
	var batch []countable
	for _, u := range p.units {
		if !p.inZone(u, z) || u.state != unitKept {
			continue
		}
		c := &cand{u: u}
		all := true
		for _, it := range u.items {
			if it.form == formExtract || it.form == formOmitted {
				continue
			}
			if compressible(it) && pred(u, it) {
				c.members = append(c.members, it)
				c.forms = append(c.forms, it.extractForm())
				continue
			}
			all = false
		}
		if len(c.members) == 0 {
			continue
		}
		c.collapse = all && !u.critical && !u.protected
		if c.collapse {
			c.compact = collapsed(srcs(u))
			batch = append(batch, c.compact)
		} else {
			batch = append(batch, c.forms...)
		}
		cands = append(cands, c)
	}
	raw, err := p.count(p.ctx, batch)
	if err != nil {
		return err
	}
	k := 0
	for _, c := range cands {
		if c.collapse {
			c.compN = raw[k]
			k++
		} else {
			c.raws = raw[k : k+len(c.forms)]
			k += len(c.forms)
		}
	}
	for _, c := range cands {
		if !p.over(target) {
			break
		}
		if c.collapse {
			if c.compN < c.u.raw {
				c.u.compact, c.u.compactN = c.compact, c.compN
				p.setUnit(c.u, unitCollapsed, c.compN)
			}
			continue
		}
		for i, it := range c.members {
			if c.raws[i] < it.raw {
				p.setItem(c.u, it, formExtract, c.forms[i], c.raws[i])
			}
		}
	}
	return nil
}

// dropPass leaves out units of zone without anything CRITICAL or protected,
// oldest first, until the window is at most target. A unit holding a user
// request (one its caller marked below CRITICAL) is collapsed to its extract
// instead, so the request stays visible as compressed.
func (p *planner) dropPass(z zone, target int64) error {
	if !p.over(target) {
		return nil
	}
	var users []*unit
	var batch []countable
	for _, u := range p.units {
		if p.inZone(u, z) && u.hasUser && !u.critical && !u.protected && u.state == unitKept {
			users = append(users, u)
			batch = append(batch, collapsed(srcs(u)))
		}
	}
	raw, err := p.count(p.ctx, batch)
	if err != nil {
		return err
	}
	ui := 0
	for _, u := range p.units {
		if !p.over(target) {
			break
		}
		if !p.inZone(u, z) || u.critical || u.protected || u.state == unitDropped || u.state == unitSummarized {
			continue
		}
		if u.hasUser {
			for ui < len(users) && users[ui] != u {
				ui++
			}
			if ui < len(users) && u.state == unitKept && raw[ui] < u.raw {
				u.compact, u.compactN = batch[ui], raw[ui]
				p.setUnit(u, unitCollapsed, raw[ui])
			}
			continue
		}
		p.setUnit(u, unitDropped, 0)
	}
	return nil
}

// omitPass replaces, in units that must stay (CRITICAL or protected), the
// content of members that may be compressed with a placeholder, oldest
// first, until the window is at most target.
func (p *planner) omitPass(z zone, target int64) error {
	if !p.over(target) {
		return nil
	}
	var its []*item
	var owners []*unit
	var batch []countable
	for _, u := range p.units {
		if !p.inZone(u, z) || u.state != unitKept {
			continue
		}
		for _, it := range u.items {
			if compressible(it) && it.form != formOmitted {
				its = append(its, it)
				owners = append(owners, u)
				batch = append(batch, it.omittedForm())
			}
		}
	}
	raw, err := p.count(p.ctx, batch)
	if err != nil {
		return err
	}
	for i, it := range its {
		if !p.over(target) {
			break
		}
		if raw[i] < it.raw {
			p.setItem(owners[i], it, formOmitted, batch[i], raw[i])
		}
	}
	return nil
}

// segments returns the runs of consecutive older units that may be
// summarized (nothing CRITICAL or protected, not compressed yet) and are
// large enough for a summary to save tokens.
func (p *planner) segments() []*segment {
	var out []*segment
	var cur *segment
	flush := func() {
		if cur != nil && cur.raw > p.minSegment {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, u := range p.units {
		if u.recent || u.critical || u.protected || u.state != unitKept {
			flush()
			continue
		}
		if cur == nil {
			cur = &segment{}
		}
		cur.units = append(cur.units, u)
		cur.msgs = append(cur.msgs, srcs(u)...)
		cur.raw += u.raw
	}
	flush()
	return out
}

// summarizePass replaces older segments with their cached summaries, oldest
// first, until the window is at most target. A segment whose summary is not
// ready is collapsed to extracts for this window and reported in wanted, so
// its summary can be computed in the background.
func (p *planner) summarizePass(target int64) error {
	if !p.over(target) {
		return nil
	}
	segs := p.segments()
	var ready []*segment
	var batch []countable
	for _, s := range segs {
		if text, ok := p.summary(s); ok {
			s.msg = summaryMessage(text, len(s.msgs))
			ready = append(ready, s)
			batch = append(batch, s.msg)
		}
	}
	raw, err := p.count(p.ctx, batch)
	if err != nil {
		return err
	}
	for i, s := range ready {
		s.n = raw[i]
	}
	for _, s := range segs {
		if !p.over(target) {
			break
		}
		if s.msg.msg == nil {
			p.wanted = append(p.wanted, s)
			continue
		}
		if s.n >= s.raw {
			continue
		}
		for i, u := range s.units {
			u.seg, u.segFirst = s, i == 0
			n := int64(0)
			if i == 0 {
				n = s.n
			}
			p.setUnit(u, unitSummarized, n)
		}
		p.summarized++
	}
	// Segments still waiting for a summary are compressed by extraction.
	for _, s := range p.wanted {
		if err := p.extractUnits(s.units); err != nil {
			return err
		}
	}
	return nil
}

// extractUnits collapses the given compressible units to their extracts.
func (p *planner) extractUnits(units []*unit) error {
	batch := make([]countable, len(units))
	for i, u := range units {
		batch[i] = collapsed(srcs(u))
	}
	raw, err := p.count(p.ctx, batch)
	if err != nil {
		return err
	}
	for i, u := range units {
		if u.state == unitKept && raw[i] < u.raw {
			u.compact, u.compactN = batch[i], raw[i]
			p.setUnit(u, unitCollapsed, raw[i])
		}
	}
	return nil
}

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
