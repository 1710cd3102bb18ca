package contextsvc

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestSummarizePassUsesReadySummaries: a segment whose summary is cached is
// replaced by it; a segment without one is collapsed to extracts for this
// window and asked for. CRITICAL units bound the segments and stay.
func TestSummarizePassUsesReadySummaries(t *testing.T) {
	t.Parallel()
	const medium = baagentv1.MessageImportance_MESSAGE_IMPORTANCE_MEDIUM
	p := planFor(t,
		userMsg("u0"), assistantMsg("a0", medium, 400), assistantMsg("a1", medium, 400),
		userMsg("u1"), assistantMsg("a2", medium, 400), assistantMsg("a3", medium, 400),
		userMsg("u2"))
	p.minSegment = 100
	p.summary = func(s *segment) (string, bool) {
		if s.msgs[0].msg.GetId() == "a0" {
			return "what a0 and a1 said", true
		}
		return "", false
	}
	p.soft = 0
	if err := (summarizePass{softTarget}).apply(p); err != nil {
		t.Fatal(err)
	}
	wantStates(t, p, map[string]unitState{
		"a0": unitSummarized, "a1": unitSummarized,
		"a2": unitCollapsed, "a3": unitCollapsed,
		"u0": unitKept, "u1": unitKept, "u2": unitKept,
	})
	_, first := itemOf(t, p, "a0")
	_, second := itemOf(t, p, "a1")
	if !first.segFirst || second.segFirst || first.seg != second.seg || second.raw != 0 {
		t.Fatalf("the summary is not carried by the segment's first unit alone")
	}
	if got, want := first.seg.msg.msg.GetContent(), "[Summary of 2 earlier messages]\nwhat a0 and a1 said"; got != want {
		t.Errorf("summary message %q, want %q", got, want)
	}
	if p.summarized != 1 || len(p.wanted) != 1 || p.wanted[0].msgs[0].msg.GetId() != "a2" {
		t.Errorf("summarized %d segments, %d wanted", p.summarized, len(p.wanted))
	}
	checkTotal(t, p)
}
