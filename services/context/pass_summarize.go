package contextsvc

// segment is a run of consecutive compressible units summarized together.
type segment struct {
	units []*unit
	msgs  []*storedMsg
	raw   int64
	key   contentHash
	msg   countable // the summary message once ready
	n     int64
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
//
// It is SUMMARIZE's first pass, on the older zone towards the soft target;
// the extract passes follow it for what summaries did not cover.
type summarizePass struct {
	target target
}

func (sp summarizePass) apply(p *planner) error {
	target := p.limit(sp.target)
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
