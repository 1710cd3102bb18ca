package contextsvc

// dropPass leaves out units of zone without anything CRITICAL or protected,
// oldest first, until the window is at most target. A unit holding a user
// request (one its caller marked below CRITICAL) is collapsed to its extract
// instead, so the request stays visible as compressed.
//
// It is TRUNCATE's own pass (older zone, soft target) and, in every
// strategy, an emergency pass on the hard target: after the older zone was
// extracted, and again on the recent zone once that was extracted.
type dropPass struct {
	zone   zone
	target target
}

func (d dropPass) apply(p *planner) error {
	z, target := d.zone, p.limit(d.target)
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
