// Package runevent holds the rules every producer and reader of run events
// shares: an event's type name, which events end a run, and the
// de-duplication id its publish carries. See docs/concepts/events.md.
package runevent

import (
	"strconv"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// payloadOneof is the Event.payload oneof, read to derive the type.
var payloadOneof = (&baagentv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")

// Type is the lowercase type of ev: the name of its payload field, "" when
// it has none.
func Type(ev *baagentv1.Event) string {
	fd := ev.ProtoReflect().WhichOneof(payloadOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// IsTerminal reports whether ev ends its run (complete, error, cancelled).
// A sub-agent's terminal event mirrored into its parent's stream (it has a
// subagent_run_id) ends the sub-agent, not the run whose stream carries it.
func IsTerminal(ev *baagentv1.Event) bool {
	if ev.GetSubagentRunId() != "" {
		return false
	}
	switch ev.GetPayload().(type) {
	case *baagentv1.Event_Complete, *baagentv1.Event_Error, *baagentv1.Event_Cancelled:
		return true
	}
	return false
}

// MaxTypeLen bounds an event type name.
const MaxTypeLen = 64

// IsTypeName reports whether t has the shape of an event type: lowercase
// snake_case, 1 to MaxTypeLen bytes.
func IsTypeName(t string) bool {
	if t == "" || len(t) > MaxTypeLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// MsgID is the Nats-Msg-Id of a run's event, "<run_id>:<seq>", so that a
// retried publish is stored once.
func MsgID(runID string, seq uint64) string {
	return runID + ":" + strconv.FormatUint(seq, 10)
}

// IsDelta reports whether ev is a streamed fragment (thought_delta,
// text_delta): the complete thought or answer follows in its own event, so
// fragments are not mirrored into a parent run's stream.
func IsDelta(ev *baagentv1.Event) bool {
	switch ev.GetPayload().(type) {
	case *baagentv1.Event_ThoughtDelta, *baagentv1.Event_TextDelta:
		return true
	}
	return false
}

// MirrorMsgID is the Nats-Msg-Id of child event childSeq mirrored into the
// parent run's stream, "<parent>:<child>:<childSeq>": two executions of the
// child that both mirror it (one taking over from the other) store it once.
func MirrorMsgID(parentRunID, childRunID string, childSeq uint64) string {
	return parentRunID + ":" + childRunID + ":" + strconv.FormatUint(childSeq, 10)
}
