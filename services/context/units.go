package contextsvc

import (
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// A unit is what compression may move as a whole: an assistant message with
// its tool calls together with the tool messages that answer them, or one
// other message. Keeping units whole is what keeps every window a valid chat
// request (OpenAI rejects a tool message that does not follow the assistant
// message calling it, and an assistant tool call without its result).
type unit struct {
	items []*item
	round int // index of the conversation round, 0 = oldest

	critical  bool // holds a CRITICAL message: never dropped, never collapsed
	protected bool // holds skill instructions: never pruned or compressed
	hasUser   bool // holds a user request
	recent    bool // in the recent zone (compressed last)

	state    unitState
	compact  countable       // the collapsed form when state == unitCollapsed
	compactN int64           // its raw count
	seg      *segment        // when state == unitSummarized
	answered map[string]bool // tool calls of the head answered in this unit
	segFirst bool            // emits the segment's summary
	raw      int64           // current raw count of what the unit puts in the window
}

type unitState uint8

const (
	unitKept       unitState = iota // members in their own (maybe compressed) forms
	unitCollapsed                   // replaced by one extract message
	unitSummarized                  // replaced by (its share of) a summary
	unitDropped                     // left out (TRUNCATE, or the budget)
)

// item is one history message in a window being planned.
type item struct {
	src  *storedMsg
	msg  countable // the form currently in the window
	form itemForm
	raw  int64
	orig int64 // raw count of the message as stored

	repaired bool                  // the head of a unit whose unanswered calls were removed
	calls    []*baagentv1.ToolCall // its remaining calls
}

// extractForm and omittedForm are the item's compressed forms, keeping a
// repair (compressed forms must not bring removed tool calls back).
func (it *item) extractForm() countable { return it.patched(it.src.forms().extract) }
func (it *item) omittedForm() countable { return it.patched(it.src.forms().omitted) }

func (it *item) patched(c countable) countable {
	if !it.repaired {
		return c
	}
	m := proto.Clone(c.msg).(*baagentv1.ChatMessage)
	m.ToolCalls = it.calls
	return countable{msg: m, hash: hashContent(m)}
}

func (it *item) origRaw() int64 { return it.orig }

type itemForm uint8

const (
	formVerbatim itemForm = iota
	formPruned            // tool output replaced by a placeholder
	formExtract           // content cut to the extract
	formOmitted           // content replaced by a placeholder (budget only)
	formRepaired          // unanswered tool calls removed
)

func (it *item) importance() baagentv1.MessageImportance {
	if v := it.src.msg.GetImportance(); v != baagentv1.MessageImportance_MESSAGE_IMPORTANCE_UNSPECIFIED {
		return v
	}
	return defaultImportance(it.src.msg)
}

func (it *item) critical() bool {
	return it.importance() == baagentv1.MessageImportance_MESSAGE_IMPORTANCE_CRITICAL
}

// protectedMsg reports skill instructions: messages a skill injected, and
// results of the `skill` tool (never pruned).
func protectedMsg(m *baagentv1.ChatMessage) bool {
	return m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION ||
		m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG ||
		(m.GetRole() == baagentv1.Role_ROLE_TOOL && m.GetToolName() == "skill")
}

// repairs counts history messages a window leaves out to stay valid.
type repairs struct {
	orphanToolResults int // tool message answering no earlier unanswered call
	unansweredCalls   int // tool calls without a result (removed from the call)
}

// buildUnits groups history into units, in history order. Tool messages join
// the unit of the assistant message whose call they answer, wherever they
// were appended; a tool message answering nothing is left out, and tool
// calls never answered are removed from their assistant message (its form
// then needs counting: it is returned in repaired).
func buildUnits(hist []*storedMsg, raw []int64) (units []*unit, repaired []*item, rep repairs) {
	units = make([]*unit, 0, len(hist))
	pending := map[string]*unit{}
	for i, s := range hist {
		it := &item{src: s, msg: countable{msg: s.msg, hash: s.hash}, raw: raw[i], orig: raw[i]}
		m := s.msg
		if m.GetRole() == baagentv1.Role_ROLE_TOOL {
			u := pending[m.GetToolCallId()]
			if u == nil {
				rep.orphanToolResults++
				continue
			}
			delete(pending, m.GetToolCallId())
			u.items = append(u.items, it)
			u.answered[m.GetToolCallId()] = true
			continue
		}
		u := &unit{items: []*item{it}, answered: map[string]bool{}}
		for _, c := range m.GetToolCalls() {
			if _, taken := pending[c.GetId()]; !taken {
				pending[c.GetId()] = u
			}
		}
		units = append(units, u)
	}
	units, repaired, rep.unansweredCalls = stripUnanswered(units)
	round, lastKey := -1, "\x00"
	for _, u := range units {
		first := u.items[0].src.msg
		key := first.GetRoundId()
		switch {
		case key != "" && key != lastKey, key == "" && (round < 0 || first.GetRole() == baagentv1.Role_ROLE_USER):
			round++
		}
		lastKey = key
		u.round = round
		for _, it := range u.items {
			u.critical = u.critical || it.critical()
			u.protected = u.protected || protectedMsg(it.src.msg)
			u.hasUser = u.hasUser || it.src.msg.GetRole() == baagentv1.Role_ROLE_USER
			u.raw += it.raw
		}
	}
	return units, repaired, rep
}

// stripUnanswered removes tool calls that have no result in their unit
// (never answered, or their id was already waiting for an earlier call)
// from their assistant messages, dropping a message left with nothing to say.
func stripUnanswered(units []*unit) ([]*unit, []*item, int) {
	var repaired []*item
	n := 0
	out := units[:0]
	for _, u := range units {
		head := u.items[0]
		calls := head.src.msg.GetToolCalls()
		var keep []*baagentv1.ToolCall
		for _, c := range calls {
			if !u.answered[c.GetId()] {
				n++
				continue
			}
			keep = append(keep, c)
		}
		if len(keep) == len(calls) {
			out = append(out, u)
			continue
		}
		if len(keep) == 0 && head.src.msg.GetContent() == "" && len(u.items) == 1 {
			continue
		}
		d := derivedMessage(head.src.msg, head.src.msg.GetContent())
		d.msg.ToolCalls = keep
		d.hash = hashContent(d.msg)
		head.msg, head.form, head.repaired, head.calls = d, formRepaired, true, keep
		repaired = append(repaired, head)
		out = append(out, u)
	}
	return out, repaired, n
}
