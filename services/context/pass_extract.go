package contextsvc

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// memberPred selects the members an extract pass compresses; age is how
// many rounds older than the newest round the member's unit is.
type memberPred func(it *item, age int) bool

func importanceOlderThan(imp baagentv1.MessageImportance, rounds int) memberPred {
	return func(it *item, age int) bool {
		return it.importance() == imp && age > rounds
	}
}

func importanceIn(imps ...baagentv1.MessageImportance) memberPred {
	return func(it *item, _ int) bool {
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
//
// EXTRACT and SUMMARIZE run it on the older zone, towards the soft target,
// from the least important and oldest members up; every strategy
// runs it as an emergency pass on the hard target, on the older zone and
// then on the recent one.
type extractPass struct {
	zone    zone
	target  target
	members memberPred
}

func (e extractPass) apply(p *planner) error {
	target := p.limit(e.target)
	if !p.over(target) {
		return nil
	}
	cands, batch := e.candidates(p)
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

// extractCand is a unit the pass would compress: its selected members with
// their extracts, or, when the whole unit may go, its collapsed form.
type extractCand struct {
	u        *unit
	members  []*item
	forms    []countable
	raws     []int64
	collapse bool
	compact  countable
	compN    int64
}

// candidates returns the kept units of the pass's zone with members it
// selects, oldest first, and the forms to count for them, in that order.
func (e extractPass) candidates(p *planner) ([]*extractCand, []countable) {
	var cands []*extractCand
	var batch []countable
	for _, u := range p.units {
		if !p.inZone(u, e.zone) || u.state != unitKept {
			continue
		}
		c := &extractCand{u: u}
		all := true
		for _, it := range u.items {
			if it.form == formExtract || it.form == formOmitted {
				continue
			}
			if compressible(it) && e.members(it, p.lastRound-u.round) {
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
	return cands, batch
}
