// Package publish publishes one run's events to JetStream, in order and
// exactly once each.
package publish

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

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
)

// Event publishing. Every event of a run goes to
// baagent.<tenant>.run.<run_id>.events with a seq that is contiguous from 1
// and the Nats-Msg-Id header <run_id>:<seq>, so a retried publish is a
// no-op. Events are pipelined (published without waiting for each ack) and
// confirmed in batches by Publisher.flush; see below for how a failed
// publish is repaired so that the stream holds every seq once, in order.

// publishAttempts bounds retries of one event publish; JetStream dedupes
// the retries by Nats-Msg-Id.
const publishAttempts = 4

// ErrTerminalSent is returned for an event emitted after the terminal one.
var ErrTerminalSent = errors.New("run already ended")

// Pipelining. emit publishes asynchronously and returns; flush waits for
// the acks of everything emitted since the last flush. The run flushes
// before anything records a seq (run records, checkpoints) and after the
// terminal event, so a stored last_seq always names acknowledged events.
//
// A failed publish must not leave a gap: JetStream may have stored event
// k+1 while event k failed (a rejected or lost message on a reconnect). The
// repair republishes, synchronously and in order, every event from the
// first unconfirmed one with its own Nats-Msg-Id: those already stored are
// dropped as duplicates and their ack names where they are, the missing
// ones are appended. If that leaves an event stored before one with a lower
// seq, the events stored too early are deleted from the stream and
// published again after it under a fresh Nats-Msg-Id (<run_id>:<seq>:<gen>,
// since the old id is still in the duplicate window), so the stream holds
// each seq exactly once and in seq order.

const (
	// maxPipelined bounds the events in flight; emit flushes beyond it.
	maxPipelined = 64
	// ackWait bounds waiting for the pipelined acks of one flush; events
	// whose ack has not come by then are treated as unconfirmed and
	// republished (a dedup makes that safe). One bound for the whole
	// batch, not one per event: after a NATS restart none of the lost
	// acks will come, and waiting for each in turn would outlast any
	// caller's deadline (the terminal event's in particular).
	ackWait = 5 * time.Second
	// maxRepairRounds bounds the delete-and-republish rounds of a repair.
	maxRepairRounds = 3
)

// Sink is what the Publisher needs of JetStream; jetstream.JetStream
// implements it (tests wrap it to inject failures).
type Sink interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// traceparentHeader carries the W3C span context of the execution that
// published an event.
const traceparentHeader = "traceparent"

// inflight is one pipelined event.
type inflight struct {
	seq    uint64
	typ    string
	msg    *nats.Msg
	ev     *baagentv1.Event       // kept while fenced, to renumber it
	future jetstream.PubAckFuture // nil when the async publish was refused
	pos    uint64                 // stream sequence once confirmed
}

// Publisher publishes one run's events in order. It is safe for concurrent
// use (parallel tool calls emit act and observe events).
type Publisher struct {
	sink    Sink
	subject string
	base    *baagentv1.Event // run_id, conversation_id, tenant, parent_run_id

	mu       sync.Mutex
	seq      uint64 // last emitted
	acked    uint64 // last confirmed: every seq up to it is stored in order
	lastPos  uint64 // stream sequence of the event acked
	pending  []*inflight
	terminal bool
	broken   error // a repair failed: no further event can be trusted
	gen      int   // fresh Nats-Msg-Id generation for repaired events
	// idSuffix distinguishes the Nats-Msg-Ids of a resumed execution from
	// those of the execution it replaces (whose unconfirmed events may have
	// been deleted but are still in the duplicate window).
	idSuffix string
	// traceparent is the span context of the execution publishing, sent
	// in every event's headers (empty: untraced, no header).
	traceparent string
	// fenced: other writers may append to the subject (fence.go).
	fenced bool
}

// New returns the publisher of run's events, continuing after its record's
// last_seq; traceparent, when not empty, goes in every event's headers.
func New(sink Sink, run *baagentv1.Run, traceparent string) (*Publisher, error) {
	subject, err := natsx.EventSubject(run.GetTenant(), run.GetRunId())
	if err != nil {
		return nil, err
	}
	return &Publisher{
		sink:        sink,
		subject:     subject,
		traceparent: traceparent,
		seq:         run.GetLastSeq(),
		acked:       run.GetLastSeq(),
		base: &baagentv1.Event{
			RunId:          run.GetRunId(),
			ConversationId: run.GetConversationId(),
			Tenant:         run.GetTenant(),
			ParentRunId:    run.GetParentRunId(),
			TraceId:        run.GetTraceId(),
		},
	}, nil
}

// Emit fills ev's envelope (ids, seq, cursor, ts, type) and publishes it
// without waiting for the ack. After a terminal event every further emit
// fails with ErrTerminalSent, so a run has exactly one terminal event.
func (p *Publisher) Emit(ctx context.Context, ev *baagentv1.Event) error {
	return p.add(ctx, ev, true)
}

// Hold numbers ev like Emit but does not send it: it stays pending (a
// checkpoint carries it in its outbox) until the next flush publishes it.
// For an event that must not be seen before the state it announces is
// stored. Nothing may be emitted between a hold and its flush.
func (p *Publisher) Hold(ctx context.Context, ev *baagentv1.Event) error {
	return p.add(ctx, ev, false)
}

func (p *Publisher) add(ctx context.Context, ev *baagentv1.Event, send bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		return ErrTerminalSent
	}
	if p.broken != nil {
		return p.broken
	}
	seq := p.seq + 1
	ev.RunId = p.base.RunId
	ev.ConversationId = p.base.ConversationId
	ev.Tenant = p.base.Tenant
	ev.ParentRunId = p.base.ParentRunId
	ev.TraceId = p.base.TraceId
	ev.Seq = seq
	ev.Cursor = strconv.FormatUint(seq, 10)
	ev.Ts = timestamppb.Now()
	ev.Type = runevent.Type(ev)
	data, err := proto.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	msg := &nats.Msg{Subject: p.subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, runevent.MsgID(ev.RunId, seq)+p.idSuffix)
	if p.traceparent != "" {
		msg.Header[traceparentHeader] = []string{p.traceparent}
	}
	f := &inflight{seq: seq, typ: ev.Type, msg: msg}
	if p.fenced {
		return p.addFencedLocked(ctx, f, ev, send)
	}
	if send {
		// A refused async publish (stalled, disconnected) is left for the
		// flush to republish.
		f.future, _ = p.sink.PublishMsgAsync(msg)
	}
	p.seq = seq
	p.terminal = runevent.IsTerminal(ev)
	p.pending = append(p.pending, f)
	if send && len(p.pending) >= maxPipelined {
		return p.flushLocked(ctx)
	}
	return nil
}

// EmitNow emits ev and waits until every event up to it is stored.
func (p *Publisher) EmitNow(ctx context.Context, ev *baagentv1.Event) error {
	if err := p.Emit(ctx, ev); err != nil {
		return err
	}
	return p.Flush(ctx)
}

// Flush waits until every emitted event is stored, in seq order.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushLocked(ctx)
}

func (p *Publisher) flushLocked(ctx context.Context) error {
	if p.broken != nil {
		return p.broken
	}
	if len(p.pending) == 0 {
		return nil
	}
	if p.fenced {
		return p.flushFencedLocked(ctx)
	}
	batch := p.pending
	if err := p.confirm(ctx, batch); err != nil {
		if ctx.Err() == nil {
			p.broken = err
		}
		return err
	}
	last := batch[len(batch)-1]
	p.acked, p.lastPos = last.seq, last.pos
	p.pending = p.pending[:0]
	return nil
}

// confirm gives every event of batch its stream position: the pipelined
// ack, or else a synchronous republish (a stored event is deduped and its
// ack names where it is, a missing one is appended). Then, if some event
// was stored ahead of an earlier one, the events stored too early are
// deleted and published again after it.
func (p *Publisher) confirm(ctx context.Context, batch []*inflight) error {
	deadline := time.Now().Add(ackWait)
	for _, f := range batch {
		if f.pos != 0 {
			continue // confirmed by an earlier, interrupted flush
		}
		if f.future != nil {
			pos, err := awaitAck(ctx, f.future, time.Until(deadline))
			if err == nil {
				f.pos = pos
				continue
			}
			if ctx.Err() != nil {
				return err
			}
			f.future = nil // its answer was consumed (or never came)
		}
		if err := p.publishSync(ctx, f); err != nil {
			return err
		}
	}
	for range maxRepairRounds {
		bad := firstStoredEarly(p.lastPos, batch)
		if bad < 0 {
			return nil
		}
		stream, err := p.sink.Stream(ctx, natsx.StreamEvents)
		if err != nil {
			return fmt.Errorf("reorder events from %d: %w", batch[bad].seq, err)
		}
		for _, f := range batch[bad:] {
			if err := stream.DeleteMsg(ctx, f.pos); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("reorder events: delete event %d: %w", f.seq, err)
			}
			f.pos = 0
		}
		p.gen++
		for _, f := range batch[bad:] {
			f.msg.Header.Set(jetstream.MsgIDHeader, runevent.MsgID(p.base.RunId, f.seq)+p.idSuffix+":"+strconv.Itoa(p.gen))
			if err := p.publishSync(ctx, f); err != nil {
				return err
			}
		}
	}
	if bad := firstStoredEarly(p.lastPos, batch); bad >= 0 {
		return fmt.Errorf("events from %d could not be stored in order", batch[bad].seq)
	}
	return nil
}

// awaitAck returns the stream sequence an async publish was stored at,
// waiting at most wait (not at all when wait <= 0: an ack already in).
func awaitAck(ctx context.Context, f jetstream.PubAckFuture, wait time.Duration) (uint64, error) {
	if wait <= 0 {
		select {
		case ack := <-f.Ok():
			return ack.Sequence, nil
		case err := <-f.Err():
			return 0, err
		default:
			return 0, errors.New("no acknowledgement")
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		return ack.Sequence, nil
	case err := <-f.Err():
		return 0, err
	case <-t.C:
		return 0, errors.New("no acknowledgement")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// firstStoredEarly returns the index of the first event of batch stored at
// a stream position after a later event's, or -1 when positions increase.
func firstStoredEarly(prev uint64, batch []*inflight) int {
	for k, f := range batch {
		if f.pos > prev {
			prev = f.pos
			continue
		}
		for j := range k {
			if batch[j].pos > f.pos {
				return j
			}
		}
		return k // positioned before the previous batch: republish from it
	}
	return -1
}

// publishSync publishes one event and waits for its ack, retrying with
// backoff; JetStream dedupes the retries by Nats-Msg-Id.
func (p *Publisher) publishSync(ctx context.Context, f *inflight) error {
	var lastErr error
	for attempt := range publishAttempts {
		if attempt > 0 && !retry.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond) {
			return fmt.Errorf("publish %s event %d: %w (last error: %v)", f.typ, f.seq, ctx.Err(), lastErr)
		}
		ack, err := p.sink.PublishMsg(ctx, f.msg)
		if err == nil {
			f.pos = ack.Sequence
			return nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("publish %s event %d to %s: %w", f.typ, f.seq, p.subject, lastErr)
}

// Unconfirmed returns the last confirmed event (seq and stream sequence)
// and the events emitted after it, with their total size. Acks that have
// already arrived are taken in first (without waiting), so the list is
// usually short: the events of the last few hundred microseconds.
func (p *Publisher) Unconfirmed() (seq, pos uint64, outbox []checkpoint.OutboxEvent, size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked()
	for _, f := range p.pending {
		outbox = append(outbox, checkpoint.OutboxEvent{Seq: f.seq, Data: f.msg.Data})
		size += len(f.msg.Data)
	}
	return p.acked, p.lastPos, outbox, size
}

// reapLocked confirms, without waiting, the leading pending events whose
// acks have arrived and that were stored in order; anything else (no ack
// yet, an error, a position out of order) is left for flush.
func (p *Publisher) reapLocked() {
	if p.broken != nil {
		return
	}
	n := 0
	for _, f := range p.pending {
		if f.pos == 0 && f.future != nil {
			select {
			case ack := <-f.future.Ok():
				f.pos = ack.Sequence
			case <-f.future.Err(): //nolint:errcheck // the error only means: publish again
				f.future = nil // flush publishes it again
			default:
			}
		}
		if f.pos == 0 || f.pos <= p.lastPos {
			break
		}
		p.acked, p.lastPos = f.seq, f.pos
		n++
	}
	if n > 0 {
		p.pending = append(p.pending[:0], p.pending[n:]...)
	}
}

// Republish stores the events of a checkpoint's outbox that follow the
// last stored one (the replica that emitted them died before they were
// confirmed), in order, under this execution's Nats-Msg-Ids. It returns
// the terminal event if one of them is.
func (p *Publisher) Republish(ctx context.Context, outbox []checkpoint.OutboxEvent) (*baagentv1.Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var terminal *baagentv1.Event
	for _, e := range outbox {
		if e.Seq <= p.seq {
			continue // stored
		}
		if e.Seq != p.seq+1 || len(p.pending) > 0 {
			return nil, fmt.Errorf("checkpoint holds event %d but the stream ends at %d", e.Seq, p.seq)
		}
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(e.Data, ev); err != nil || ev.GetSeq() != e.Seq {
			return nil, fmt.Errorf("checkpoint holds an unreadable event %d", e.Seq)
		}
		msg := &nats.Msg{Subject: p.subject, Data: e.Data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, runevent.MsgID(p.base.RunId, e.Seq)+p.idSuffix)
		if p.traceparent != "" {
			msg.Header[traceparentHeader] = []string{p.traceparent}
		}
		f := &inflight{seq: e.Seq, typ: ev.GetType(), msg: msg}
		if err := p.publishSync(ctx, f); err != nil {
			return nil, err
		}
		if f.pos <= p.lastPos {
			return nil, fmt.Errorf("event %d stored at %d, before event %d", e.Seq, f.pos, p.seq)
		}
		p.seq, p.acked, p.lastPos = e.Seq, e.Seq, f.pos
		if runevent.IsTerminal(ev) {
			p.terminal, terminal = true, ev
			break
		}
	}
	return terminal, nil
}

// Position returns the last acknowledged event's seq and stream sequence.
func (p *Publisher) Position() (seq, pos uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked, p.lastPos
}

// ContinueAfter makes the next event seq+1, after the event stored at
// stream sequence pos, with Nats-Msg-Ids marked by suffix.
func (p *Publisher) ContinueAfter(seq, pos uint64, suffix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq, p.acked, p.lastPos, p.idSuffix = seq, seq, pos, suffix
}

// LastSeq returns the seq of the last acknowledged event.
func (p *Publisher) LastSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}
