package contextsvc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// fakeCount charges a message its content length plus 4, so that a pass
// sees real compressed forms with counts a test can predict, without the
// tokens service.
func fakeCount(_ context.Context, cs []countable) ([]int64, error) {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = int64(len(c.msg.GetContent())) + 4
	}
	return out, nil
}

// planFor is a planner over a valid history, counted with fakeCount, every
// unit in the older zone, and both targets at the window's count (a test
// lowers the one its pass works towards).
func planFor(t *testing.T, msgs ...*baagentv1.ChatMessage) *planner {
	t.Helper()
	hist := make([]*storedMsg, len(msgs))
	all := make([]countable, len(msgs))
	for i, m := range msgs {
		hist[i] = &storedMsg{msg: m, hash: hashContent(m)}
		all[i] = countable{msg: m, hash: hist[i].hash}
	}
	raw, _ := fakeCount(t.Context(), all)
	units, repaired, _ := buildUnits(hist, raw)
	if len(repaired) > 0 {
		t.Fatal("planFor wants a history without unanswered tool calls")
	}
	p := &planner{ctx: t.Context(), count: fakeCount, units: units}
	for _, u := range units {
		p.total += u.raw
		p.lastRound = max(p.lastRound, u.round)
	}
	p.soft, p.hard = p.total, p.total
	return p
}

func userMsg(id string) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{Id: id, Role: roleUser, Content: "request " + id}
}

func assistantMsg(id string, imp baagentv1.MessageImportance, chars int) *baagentv1.ChatMessage {
	return &baagentv1.ChatMessage{Id: id, Role: roleAssistant, Content: strings.Repeat("n", chars), Importance: imp}
}

// itemOf returns the item of the history message id, and its unit.
func itemOf(t *testing.T, p *planner, id string) (*item, *unit) {
	t.Helper()
	for _, u := range p.units {
		for _, it := range u.items {
			if it.src.msg.GetId() == id {
				return it, u
			}
		}
	}
	t.Fatalf("no message %q in the plan", id)
	return nil, nil
}

// wantStates checks the state of the unit holding each message.
func wantStates(t *testing.T, p *planner, want map[string]unitState) {
	t.Helper()
	for id, st := range want {
		if _, u := itemOf(t, p, id); u.state != st {
			t.Errorf("unit of %s: state %d, want %d", id, u.state, st)
		}
	}
}

// checkTotal checks the planner's running total against its units.
func checkTotal(t *testing.T, p *planner) {
	t.Helper()
	var sum int64
	for _, u := range p.units {
		var items int64
		for _, it := range u.items {
			items += it.raw
		}
		if u.state == unitKept && items != u.raw {
			t.Errorf("unit of %s: raw %d, its items %d", u.items[0].src.msg.GetId(), u.raw, items)
		}
		sum += u.raw
	}
	if sum != p.total {
		t.Errorf("total %d, units add up to %d", p.total, sum)
	}
}

// rounds is n rounds of a CRITICAL user request u<r> and an assistant
// message a<r> of the given importance and length.
func rounds(n int, imp baagentv1.MessageImportance, chars int) []*baagentv1.ChatMessage {
	var out []*baagentv1.ChatMessage
	for r := range n {
		out = append(out, userMsg(fmt.Sprintf("u%d", r)), assistantMsg(fmt.Sprintf("a%d", r), imp, chars))
	}
	return out
}
