package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

// Event publishing. Every event of a run goes to
// baagent.<tenant>.run.<run_id>.events with a seq that is contiguous from 1:
// seq advances only once JetStream has acknowledged the event, and the
// Nats-Msg-Id header <run_id>:<seq> makes a retried publish a no-op, so a
// consumer never sees a gap or a duplicate.

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

// publisher publishes one run's events in order. It is safe for concurrent
// use (parallel tool calls emit act and observe events).
type publisher struct {
	js      jetstream.JetStream
	subject string
	base    *baagentv1.Event // run_id, conversation_id, tenant, parent_run_id

	mu       sync.Mutex
	seq      uint64 // last published
	terminal bool
	onSeq    func(uint64) // called under mu after each publish
}

func newPublisher(js jetstream.JetStream, run *baagentv1.Run) (*publisher, error) {
	subject, err := natsx.EventSubject(run.GetTenant(), run.GetRunId())
	if err != nil {
		return nil, err
	}
	return &publisher{
		js:      js,
		subject: subject,
		seq:     run.GetLastSeq(),
		base: &baagentv1.Event{
			RunId:          run.GetRunId(),
			ConversationId: run.GetConversationId(),
			Tenant:         run.GetTenant(),
			ParentRunId:    run.GetParentRunId(),
		},
	}, nil
}

// emit fills ev's envelope (ids, seq, cursor, ts, type) and publishes it.
// After a terminal event every further emit fails with errTerminalSent, so
// a run has exactly one terminal event.
func (p *publisher) emit(ctx context.Context, ev *baagentv1.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		return errTerminalSent
	}
	seq := p.seq + 1
	ev.RunId = p.base.RunId
	ev.ConversationId = p.base.ConversationId
	ev.Tenant = p.base.Tenant
	ev.ParentRunId = p.base.ParentRunId
	ev.Seq = seq
	ev.Cursor = strconv.FormatUint(seq, 10)
	ev.Ts = timestamppb.Now()
	ev.Type = EventType(ev)
	data, err := proto.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	msg := &nats.Msg{Subject: p.subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, MsgID(ev.RunId, seq))
	var lastErr error
	for attempt := range publishAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("publish %s event %d: %w (last error: %v)", ev.Type, seq, ctx.Err(), lastErr)
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		if _, lastErr = p.js.PublishMsg(ctx, msg); lastErr == nil {
			p.seq = seq
			p.terminal = IsTerminal(ev)
			if p.onSeq != nil {
				p.onSeq(seq)
			}
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("publish %s event %d to %s: %w", ev.Type, seq, p.subject, lastErr)
}

// lastSeq returns the seq of the last published event.
func (p *publisher) lastSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// ended reports whether the terminal event was published.
func (p *publisher) ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terminal
}
