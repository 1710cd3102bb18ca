package orchestrator

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ListRuns returns run summaries, not whole records: a run's input may be
// 1 MiB and its answer and metrics larger still, so fifty whole records
// would not fit in one gRPC message (and a list needs a preview, not the
// text). GetRun returns the whole run.

// TruncatedMarker ends a text field that a ListRuns summary shortened.
const TruncatedMarker = "…[truncated]"

const (
	// listPreviewBytes bounds input, final_answer and error.message in a
	// summary.
	listPreviewBytes = 512
	// shortPreviewBytes is the preview of a summary that alone would not
	// fit in a page (only with a -max-msg-bytes of a few KiB).
	shortPreviewBytes = 128
)

// preview returns s, or its first n bytes (cut on a character boundary)
// followed by TruncatedMarker when s is longer. The preview is a copy, so
// it does not keep the whole text in memory.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n]) + TruncatedMarker
}

// summarize makes run (a decoded record) its ListRuns summary, in place:
// previews of the texts, and the metrics' totals without the per-call list
// and the per-tool table (their size grows with the run's tool calls).
func summarize(run *baagentv1.Run) {
	run.Input = preview(run.GetInput(), listPreviewBytes)
	run.FinalAnswer = preview(run.GetFinalAnswer(), listPreviewBytes)
	if e := run.GetError(); e != nil {
		e.Message = preview(e.GetMessage(), listPreviewBytes)
	}
	run.Plan = nil // GetRun has it
	if m := run.GetMetrics(); m != nil {
		m.ToolCalls = nil
		m.ToolStats = nil
	}
}

// listPageBudget is how many bytes of runs a ListRuns response may carry
// under a gRPC message limit of maxMsgBytes. The headroom leaves room for
// the page token and for hops that re-encode the page (the gateway wraps it
// in its own response); splitting a page early costs a round trip, one over
// the limit fails the whole listing.
func listPageBudget(maxMsgBytes int) int {
	return maxMsgBytes - maxMsgBytes/8
}

// itemSize is what run adds to a ListRunsResponse (field 1, repeated).
func itemSize(run *baagentv1.Run) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(run))
}

// tokenSize is what a next_page_token continuing after run adds (field 2).
func tokenSize(run *baagentv1.Run) int {
	return protowire.SizeTag(2) + protowire.SizeBytes(len(encodePageToken(run.GetRunId())))
}

// fitPage keeps the leading runs whose summaries fit in budget bytes, with
// room for the page token, and reports whether it left some out (the
// client continues with the token). A page always keeps its first run, so
// listing makes progress: shrunk further when alone it would not fit.
func fitPage(runs []*baagentv1.Run, budget int) ([]*baagentv1.Run, bool) {
	used := 0
	for i, r := range runs {
		if i == 0 {
			r = shrink(r, budget-tokenSize(r))
			runs[0] = r
		}
		n := itemSize(r)
		if i > 0 && used+n+tokenSize(r) > budget {
			return runs[:i], true
		}
		used += n
	}
	return runs, false
}

// shrink returns run, or when its summary alone exceeds budget bytes a
// smaller copy: shorter previews without metrics, then, if that is still
// too large, without labels and pending question as well (marked texts
// only). The second step is reached only under a message limit of a few
// KiB; GetRun returns the whole run.
func shrink(run *baagentv1.Run, budget int) *baagentv1.Run {
	if itemSize(run) <= budget {
		return run
	}
	r := proto.Clone(run).(*baagentv1.Run)
	r.Metrics = nil
	shorten := func(n int) {
		r.Input = preview(r.GetInput(), n)
		r.FinalAnswer = preview(r.GetFinalAnswer(), n)
		if e := r.GetError(); e != nil {
			e.Message = preview(e.GetMessage(), n)
		}
	}
	shorten(shortPreviewBytes)
	if itemSize(r) <= budget {
		return r
	}
	r.Labels, r.PendingInput = nil, nil
	shorten(0)
	return r
}
