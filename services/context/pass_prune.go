package contextsvc

import (
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

// pruneToolOutputs prunes old tool outputs: walking back from the
// newest message, tool outputs of the last two user turns and the newest 40K
// tool-output tokens are protected; older ones are pruned, but only when at
// least 20K tokens would go. Skill instructions and CRITICAL outputs (errors)
// are never pruned; a stored summary ends the walk (what precedes it was
// compacted already).
//
// It runs first whenever a window is compressed, before the strategy's
// passes and whatever the strategy, unless the request turns it off
// (budget.prune_tool_outputs = false).
func (p *planner) pruneToolOutputs() error {
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
