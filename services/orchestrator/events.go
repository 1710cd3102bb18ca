package orchestrator

import (
	"errors"
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
