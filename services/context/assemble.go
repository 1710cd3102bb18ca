package contextsvc

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// category is a line of the window breakdown.
type category uint8

const (
	catSystem category = iota
	catSkills
	catTools
	catHistory
	catToolOutputs
	catSummaries
	numCategories
)

// windowStats summarises what compression did to the history.
type windowStats struct {
	summarized    int   // history messages standing as extracts or summaries
	dropped       int   // history messages left out
	compressedRaw int64 // raw count of the history messages compressed
}

func (w windowStats) changed() bool { return w.summarized > 0 || w.dropped > 0 }

// assemble lays out the window: system messages, then the history units as
// planned. It fills the messages and the breakdown.
func assemble(req *baagentv1.BuildWindowRequest, units []*unit, sysRaw []int64, fixed toolsCount, mg marginer, b windowBudget) (*baagentv1.BuildWindowResponse, windowStats) {
	l := &layout{mg: mg, msgs: make([]*baagentv1.WindowMessage, 0, len(req.GetSystemMessages())+len(units)+4)}
	for i, m := range req.GetSystemMessages() {
		c := catSystem
		if k := m.GetKind(); k == baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG || k == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION {
			c = catSkills
		}
		l.add(m, sysRaw[i], false, nil, c)
	}
	for _, u := range units {
		l.addUnit(u)
	}
	l.cats[catTools] = fixed.tools
	l.cats[catHistory] += fixed.priming // the reply slot belongs to the conversation
	return &baagentv1.BuildWindowResponse{Messages: l.msgs, Breakdown: l.breakdown(b)}, l.st
}

// layout is a window being laid out: its messages, the raw count of each
// breakdown category, and what compression did to the history.
type layout struct {
	mg   marginer
	msgs []*baagentv1.WindowMessage
	cats [numCategories]int64
	st   windowStats
}

func (l *layout) add(m *baagentv1.ChatMessage, raw int64, compressed bool, sources []string, c category) {
	l.cats[c] += raw
	l.msgs = append(l.msgs, &baagentv1.WindowMessage{Message: m, Tokens: l.mg.apply(raw), IsCompressed: compressed, SourceMessageIds: sources})
}

// addUnit lays out one history unit in the form the planner left it in.
func (l *layout) addUnit(u *unit) {
	switch u.state {
	case unitDropped:
		l.st.dropped += len(u.items)
		l.st.compressedRaw += unitOrigRaw(u)
	case unitCollapsed:
		l.st.summarized += len(u.items)
		l.st.compressedRaw += unitOrigRaw(u)
		l.add(u.compact.msg, u.compactN, true, unitIDs(u), catSummaries)
	case unitSummarized:
		l.st.summarized += len(u.items)
		l.st.compressedRaw += unitOrigRaw(u)
		if u.segFirst {
			var src []string
			for _, su := range u.seg.units {
				src = append(src, unitIDs(su)...)
			}
			l.add(u.seg.msg.msg, u.seg.n, true, src, catSummaries)
		}
	default:
		l.addKept(u)
	}
}

// addKept lays out the members of a kept unit, each in its own form.
func (l *layout) addKept(u *unit) {
	for _, it := range u.items {
		m := it.src.msg
		c := catHistory
		switch {
		case protectedMsg(m):
			c = catSkills
		case it.form == formExtract || it.form == formOmitted:
			c = catSummaries
		case m.GetRole() == baagentv1.Role_ROLE_TOOL:
			c = catToolOutputs
		}
		if it.form == formVerbatim {
			l.add(m, it.raw, false, nil, c)
			continue
		}
		if it.form == formExtract || it.form == formOmitted {
			l.st.summarized++
			l.st.compressedRaw += it.origRaw()
		}
		l.add(it.msg.msg, it.raw, it.form != formRepaired, []string{m.GetId()}, c)
	}
}

// breakdown is the window's count by category. The margin is applied to
// running sums so the parts add up to the total.
func (l *layout) breakdown(b windowBudget) *baagentv1.WindowBreakdown {
	var parts [numCategories]int64
	var cum, prev int64
	for c := category(0); c < numCategories; c++ {
		cum += l.cats[c]
		cur := l.mg.apply(cum)
		parts[c] = cur - prev
		prev = cur
	}
	return &baagentv1.WindowBreakdown{
		SystemTokens:        parts[catSystem],
		SkillsTokens:        parts[catSkills],
		ToolSchemaTokens:    parts[catTools],
		HistoryTokens:       parts[catHistory],
		ToolOutputTokens:    parts[catToolOutputs],
		SummaryTokens:       parts[catSummaries],
		OutputReserveTokens: b.outputReserve,
		TotalTokens:         prev,
		InputBudgetTokens:   b.input,
	}
}

func unitIDs(u *unit) []string {
	out := make([]string, len(u.items))
	for i, it := range u.items {
		out[i] = it.src.msg.GetId()
	}
	return out
}

func unitOrigRaw(u *unit) (n int64) {
	for _, it := range u.items {
		n += it.origRaw()
	}
	return n
}
