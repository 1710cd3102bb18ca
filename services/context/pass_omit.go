package contextsvc

// omitPass replaces, in units that must stay (CRITICAL or protected), the
// content of members that may be compressed with a placeholder, oldest
// first, until the window is at most target.
//
// It is the last resort of every strategy, on the hard target only: it runs
// on a zone after that zone's droppable units are gone.
type omitPass struct {
	zone   zone
	target target
}

func (o omitPass) apply(p *planner) error {
	z, target := o.zone, p.limit(o.target)
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
