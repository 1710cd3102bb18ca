package orchestrator

import (
	"errors"
	"strconv"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Event publishing. Every event of a run goes to
// baagent.<tenant>.run.<run_id>.events with a seq that is contiguous from 1
// and the Nats-Msg-Id header <run_id>:<seq>, so a retried publish is a
// no-op. Events are pipelined (published without waiting for each ack) and
// confirmed in batches by publisher.flush; see pipeline.go for how a failed
// publish is repaired so that the stream holds every seq once, in order.

// publishAttempts bounds retries of one event publish; JetStream dedupes
// the retries by Nats-Msg-Id.
const publishAttempts = 4

// errTerminalSent is returned for an event emitted after the terminal one.
var errTerminalSent = errors.New("run already ended")

// payloadOneof is the Event.payload oneof, read to derive Event.type.
var payloadOneof = (&baagentv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")

// EventType returns the lowercase type of ev: the name of its payload field.
func EventType(ev *baagentv1.Event) string {
	fd := ev.ProtoReflect().WhichOneof(payloadOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// IsTerminal reports whether ev ends its run (complete, error, cancelled).
func IsTerminal(ev *baagentv1.Event) bool {
	switch ev.GetPayload().(type) {
	case *baagentv1.Event_Complete, *baagentv1.Event_Error, *baagentv1.Event_Cancelled:
		return true
	}
	return false
}

// MsgID is the Nats-Msg-Id of a run's event: "<run_id>:<seq>".
func MsgID(runID string, seq uint64) string {
	return runID + ":" + strconv.FormatUint(seq, 10)
}
