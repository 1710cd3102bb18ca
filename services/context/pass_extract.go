package contextsvc

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

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
