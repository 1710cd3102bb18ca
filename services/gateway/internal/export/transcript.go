package export

import (
	"hash/maphash"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The transcript: what the model and the user said, rebuilt from a run's
// events. A run is its request (the start event's input), then one
// assistant turn per model call — its reasoning, its text and its tool
// calls — each followed by the calls' results, then the final answer.
//
// Which event says what:
//   - start: the user's request.
//   - thought_delta / text_delta: the reasoning and the text of the model
//     call in progress, streamed.
//   - thought: in a step that calls tools, the whole reasoning and then the
//     whole text of the model's message, one event each (blank ones are not
//     published). They replace the streamed fragments of that step.
//   - act: a tool call, with the model's call id; observe: its result.
//   - complete: the final answer, which replaces the streamed text of the
//     last step. error / cancelled: the run ended early.
//
// Human input (clarifications, decisions, permissions) reaches the model as
// the observation of the call that asked, so it is in the tool results.
// Events mirrored from a sub-agent (subagent_run_id set) are the
// sub-agent's transcript, not this run's, and are left out; the task call
// that delegated and its result are in.

// Results given to calls that have none.
const (
	noteCancelled = "No result: the run was cancelled before this tool call finished"
	noteFailed    = "No result: the run failed before this tool call finished"
	noteUnended   = "No result: the run had not finished this tool call when it was exported"
	noteMovedOn   = "No result was recorded for this tool call: the run went on without one"
	noteCompleted = "No result was recorded for this tool call: the run completed without one"
)

// call is one tool call of an assistant turn.
type call struct {
	id     string // unique within the export; the model's id unless reused
	name   string
	input  *structpb.Struct
	raw    string // the arguments verbatim when they were not a JSON object
	origID string // the model's id, which results are matched by

	answered bool
	result   string
	isError  bool
}

// arguments is the call's arguments as the OpenAI tool_calls carry them: a
// JSON text, the model's own when it was not an object.
func (c *call) arguments(b []byte) []byte {
	if c.input == nil && c.raw != "" {
		return append(b, c.raw...)
	}
	return appendStruct(b, c.input)
}

// turn is one model call: an assistant message and its calls' results.
type turn struct {
	thinkingDeltas strings.Builder
	textDeltas     strings.Builder
	whole          []string // thought events, in order
	final          bool     // closed by complete: finalText is the text
	finalText      string
	calls          []*call
	observed       bool // the assistant message is out; results arrive
}

// content is the turn's reasoning and text.
func (t *turn) content() (thinking, text string) {
	th, tx := t.thinkingDeltas.String(), t.textDeltas.String()
	switch {
	case t.final:
		return th, t.finalText
	case len(t.whole) == 0:
		return th, tx
	}
	// The thought events are the message's reasoning and text, whole; the
	// streamed fragments tell which is which.
	var thinkingParts, textParts, rest []string
	usedTh, usedTx := false, false
	for _, w := range t.whole {
		switch {
		case !usedTh && th != "" && sameText(w, th):
			thinkingParts, usedTh = append(thinkingParts, w), true
		case !usedTx && tx != "" && sameText(w, tx):
			textParts, usedTx = append(textParts, w), true
		default:
			rest = append(rest, w)
		}
	}
	// Unmatched: the reasoning is published before the text.
	if len(rest) >= 2 && len(thinkingParts) == 0 {
		thinkingParts, rest = rest[:1], rest[1:]
	}
	textParts = append(textParts, rest...)
	return strings.Join(thinkingParts, "\n\n"), strings.Join(textParts, "\n\n")
}

func sameText(a, b string) bool {
	return a == b || strings.TrimSpace(a) == strings.TrimSpace(b)
}

func (t *turn) allAnswered() bool {
	for _, c := range t.calls {
		if !c.answered {
			return false
		}
	}
	return true
}

// sink receives the transcript, message by message.
type sink interface {
	user(text string) error
	// assistant is one model message; calls may be empty.
	assistant(thinking, text string, calls []*call) error
	// results answers every call of the preceding assistant message, in
	// its order.
	results(calls []*call) error
	// end ends the document.
	end() error
}

// transcript rebuilds the transcript from events and feeds it to a sink.
type transcript struct {
	out sink

	runID   string
	started bool // an event of runID was seen
	ended   bool // runID's terminal event was seen
	cur     *turn
	newStep bool // a step_start came after cur's last model output

	seed    maphash.Seed
	ids     map[uint64]struct{} // hashes of the ids used so far
	suffix  map[uint64]int      // by hash of a reused id: the next suffix to try
	unnamed int
}

func newTranscript(out sink) *transcript {
	return &transcript{out: out, seed: maphash.MakeSeed(), ids: map[uint64]struct{}{}, suffix: map[uint64]int{}}
}

// add takes the next event.
func (t *transcript) add(ev *baagentv1.Event) error {
	if ev.GetSubagentRunId() != "" {
		return nil // the sub-agent's own transcript
	}
	if !t.started || ev.GetRunId() != t.runID {
		if t.started {
			if err := t.endRun(noteUnended); err != nil {
				return err
			}
		}
		t.runID, t.started, t.ended, t.newStep = ev.GetRunId(), true, false, false
	}
	if t.ended {
		return nil // nothing follows a terminal event
	}
	switch p := ev.GetPayload().(type) {
	case *baagentv1.Event_Start:
		if err := t.closeTurn(noteMovedOn); err != nil {
			return err
		}
		if in := p.Start.GetInput(); in != "" {
			return t.out.user(in)
		}
	case *baagentv1.Event_StepStart:
		// A new model call may follow, or the same step resumes (after the
		// user's answer, or on another replica) and delivers the pending
		// results: the turn closes only when new model output arrives.
		t.newStep = true
	case *baagentv1.Event_ThoughtDelta:
		cur, err := t.building()
		if err != nil {
			return err
		}
		cur.thinkingDeltas.WriteString(p.ThoughtDelta.GetDelta())
	case *baagentv1.Event_TextDelta:
		cur, err := t.building()
		if err != nil {
			return err
		}
		cur.textDeltas.WriteString(p.TextDelta.GetDelta())
	case *baagentv1.Event_Thought:
		cur, err := t.building()
		if err != nil {
			return err
		}
		if th := p.Thought.GetThought(); strings.TrimSpace(th) != "" {
			cur.whole = append(cur.whole, th)
		}
	case *baagentv1.Event_Act:
		cur, err := t.building()
		if err != nil {
			return err
		}
		a := p.Act
		c := &call{origID: a.GetToolCallId(), name: a.GetToolName(), input: a.GetToolInput()}
		if c.input == nil {
			c.raw = a.GetRawArguments()
		}
		c.id = t.uniqueID(c.origID)
		cur.calls = append(cur.calls, c)
	case *baagentv1.Event_Observe:
		return t.observe(p.Observe)
	case *baagentv1.Event_Complete:
		return t.complete(p.Complete.GetContent())
	case *baagentv1.Event_Error:
		return t.endRun(noteFailed + ": " + p.Error.GetMessage())
	case *baagentv1.Event_Cancelled:
		note := noteCancelled
		if r := p.Cancelled.GetReason(); r != "" {
			note += ": " + r
		}
		return t.endRun(note)
	}
	return nil
}

// building is the turn that the model's output goes to: the current one
// unless its results have started or a step started since, else a new
// one.
func (t *transcript) building() (*turn, error) {
	if t.cur != nil && (t.cur.observed || t.newStep) {
		if err := t.closeTurn(noteMovedOn); err != nil {
			return nil, err
		}
	}
	if t.cur == nil {
		t.cur = &turn{}
	}
	t.newStep = false
	return t.cur, nil
}

func (t *transcript) observe(o *baagentv1.ObservePayload) error {
	cur := t.cur
	if cur == nil {
		return nil // no call waits for it (a repeated result)
	}
	var c *call
	for _, k := range cur.calls {
		if !k.answered && k.origID == o.GetToolCallId() {
			c = k
			break
		}
	}
	if c == nil {
		return nil
	}
	if !cur.observed {
		if err := t.emitAssistant(cur); err != nil {
			return err
		}
		cur.observed = true
	}
	c.answered, c.result, c.isError = true, o.GetObservation(), !o.GetSuccess()
	if cur.allAnswered() {
		t.cur = nil
		return t.out.results(cur.calls)
	}
	return nil
}

func (t *transcript) complete(answer string) error {
	cur := t.cur
	if cur != nil && (len(cur.calls) > 0 || cur.observed || t.newStep) {
		if err := t.closeTurn(noteCompleted); err != nil {
			return err
		}
		cur = nil
	}
	if cur == nil {
		cur = &turn{}
	}
	cur.final, cur.finalText = true, answer
	t.cur = nil
	t.ended = true
	return t.emitAssistant(cur)
}

// endRun closes the run's turn in progress, giving its unanswered calls
// the result note.
func (t *transcript) endRun(note string) error {
	t.ended = true
	return t.closeTurn(note)
}

// closeTurn ends the turn in progress: its message goes out if it has not,
// and calls without a result get note as an error result.
func (t *transcript) closeTurn(note string) error {
	cur := t.cur
	if cur == nil {
		return nil
	}
	t.cur = nil
	if !cur.observed {
		if err := t.emitAssistant(cur); err != nil {
			return err
		}
	}
	if len(cur.calls) == 0 {
		return nil
	}
	for _, c := range cur.calls {
		if !c.answered {
			c.answered, c.result, c.isError = true, note, true
		}
	}
	return t.out.results(cur.calls)
}

func (t *transcript) emitAssistant(cur *turn) error {
	thinking, text := cur.content()
	if thinking == "" && text == "" && len(cur.calls) == 0 {
		return nil
	}
	return t.out.assistant(thinking, text, cur.calls)
}

// uniqueID is the id a call gets in the export: the model's, unless an
// earlier call of the export has it (models may reuse ids across steps;
// Claude requires them unique), then the model's with a suffix _2, _3, ….
// A call without an id gets call_unnamed_<n>.
func (t *transcript) uniqueID(id string) string {
	base := id
	if base == "" {
		t.unnamed++
		base = "call_unnamed_" + strconv.Itoa(t.unnamed)
	}
	if h := maphash.String(t.seed, base); !t.used(h) {
		t.ids[h] = struct{}{}
		return base
	}
	// The next suffix to try for base, so that a model reusing one id in
	// every step costs one lookup per call, not one per earlier call.
	bh := maphash.String(t.seed, "\x00"+base)
	n := max(t.suffix[bh], 2)
	for ; ; n++ {
		cand := base + "_" + strconv.Itoa(n)
		if h := maphash.String(t.seed, cand); !t.used(h) {
			t.ids[h] = struct{}{}
			t.suffix[bh] = n + 1
			return cand
		}
	}
}

func (t *transcript) used(h uint64) bool {
	_, ok := t.ids[h]
	return ok
}

// finish ends the last run and the document.
func (t *transcript) finish() error {
	if t.started && !t.ended {
		if err := t.endRun(noteUnended); err != nil {
			return err
		}
	}
	return t.out.end()
}
