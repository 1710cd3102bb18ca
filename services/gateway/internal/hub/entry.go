package hub

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// JSONOptions is the one JSON mapping every client transport shows: the
// protobuf JSON mapping with the .proto field names (run_id, tool_call_id).
var JSONOptions = protojson.MarshalOptions{UseProtoNames: true}

// TypeStreamReset is the type of the transport-only reset event.
const TypeStreamReset = "stream_reset"

// Entry is one decoded event, shared read-only by every viewer of its run:
// it is decoded and rendered to JSON once, however many clients receive it.
type Entry struct {
	// Seq is the per-run seq (0 for a stream_reset).
	Seq uint64
	// Type is the lowercase event type (the SSE `event:` line).
	Type string
	// Cursor resumes after this entry.
	Cursor string
	// Event is the envelope; it must not be modified.
	Event *baagentv1.Event
	// JSON is Event in the protobuf JSON mapping with proto field names, on
	// one line: the payload every transport frames.
	JSON []byte
	// Published is when JetStream stored the event (zero for a reset).
	Published time.Time
	// Terminal is true for complete, error and cancelled.
	Terminal bool

	frames    [MaxFramings][]byte // one rendering per Options.Framings, sharing one buffer
	streamSeq uint64              // JetStream stream sequence
	size      uint64              // bytes charged to queues and buffers
	cum       uint64              // cumulative size through this entry within its feed
}

// Item is what a subscription yields: an entry and whether it arrived
// after the subscription started (live), which is when publish-to-write
// lag is meaningful.
type Item struct {
	*Entry
	Live bool
	// Offset is how many bytes of the entry's frame (of the framing given
	// to EnableDirect) the run's fan-out has already written to this
	// client; the transport writes the rest. It is 0 unless direct
	// delivery is enabled.
	Offset int
}

// entryOverhead approximates the memory of an Entry besides its JSON and
// decoded message, so tiny events are not charged as free.
const entryOverhead = 256

// decodeEntry decodes a stored event of run runID of tenant and renders it.
// An event whose envelope does not match the subject it came from is
// refused: it cannot be shown to this run's viewers.
func decodeEntry(framings []Framing, tenant, runID string, data []byte, streamSeq uint64, published time.Time) (*Entry, error) {
	ev := &baagentv1.Event{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode event at stream seq %d: %w", streamSeq, err)
	}
	switch {
	case ev.GetSeq() == 0:
		return nil, fmt.Errorf("event at stream seq %d has no seq", streamSeq)
	case ev.GetRunId() != runID || ev.GetTenant() != tenant:
		return nil, fmt.Errorf("event at stream seq %d is for run %q of tenant %q, not %q of %q", streamSeq, ev.GetRunId(), ev.GetTenant(), runID, tenant)
	}
	// The cursor is the seq (resume relies on it) and the type names the
	// payload; a publisher's other values, which could also break an SSE
	// frame with a newline, are not passed on.
	ev.Cursor = FormatCursor(ev.GetSeq())
	if !runevent.IsTypeName(ev.Type) {
		ev.Type = runevent.Type(ev)
	}
	js, err := JSONOptions.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("render event %d as JSON: %w", ev.GetSeq(), err)
	}
	e := &Entry{
		Seq:       ev.GetSeq(),
		Type:      ev.GetType(),
		Cursor:    ev.GetCursor(),
		Event:     ev,
		JSON:      js,
		Published: published,
		Terminal:  runevent.IsTerminal(ev),
		streamSeq: streamSeq,
	}
	e.size = uint64(len(js)+e.render(framings)+len(data)) + entryOverhead
	return e, nil
}

// resetEntry is the stream_reset a client gets when its cursor cannot be
// honoured: the stream continues with the event of seq earliestSeq (0 when
// nothing is retained). Its cursor resumes from that event.
func resetEntry(framings []Framing, tenant, runID, conversationID, requested, reason string, earliestSeq uint64) *Entry {
	resume := ""
	if earliestSeq > 0 {
		resume = FormatCursor(earliestSeq - 1)
	}
	ev := &baagentv1.Event{
		RunId:          runID,
		ConversationId: conversationID,
		Tenant:         tenant,
		Cursor:         resume,
		Ts:             timestamppb.Now(),
		Type:           TypeStreamReset,
		Payload: &baagentv1.Event_StreamReset{StreamReset: &baagentv1.StreamResetPayload{
			RequestedCursor: requested,
			EarliestCursor:  resume,
			EarliestSeq:     earliestSeq,
			Reason:          reason,
		}},
	}
	js, err := JSONOptions.Marshal(ev)
	if err != nil {
		// A message built here from valid strings always renders; keep the
		// stream honest anyway with a minimal body.
		js = fmt.Appendf(nil, `{"run_id":%q,"type":"stream_reset"}`, runID)
	}
	e := &Entry{Type: TypeStreamReset, Cursor: resume, Event: ev, JSON: js}
	e.size = uint64(len(js)+e.render(framings)) + entryOverhead
	return e
}
