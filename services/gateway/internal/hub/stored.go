package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baagent/baagent/internal/natsx"
)

// ReadStored calls fn with every event of the run stored when it is
// called, in seq order, each once, and returns when the last of them has
// been handled (an export, a snapshot: a run in progress is read as far as
// it has got). It reads JetStream with its own ordered consumer, as a
// feed's catch-up does, and shares no buffer with the live feeds, so it
// takes no feed slot. Events stored out of order (the orchestrator's repair
// of a failed publish) are put back in order, holding at most maxHeld;
// undecodable events are skipped, as feeds skip them. fn's error stops the
// read and is returned. The caller has checked that the tenant owns the
// run.
func (h *Hub) ReadStored(ctx context.Context, tenant, runID string, fn func(*Entry) error) error {
	if err := natsx.ValidateToken("tenant", tenant); err != nil {
		return err
	}
	if err := natsx.ValidateToken("run_id", runID); err != nil {
		return err
	}
	subject, err := natsx.EventSubject(tenant, runID)
	if err != nil {
		return err
	}
	st, err := h.eventStream(ctx)
	if err != nil {
		return err
	}
	lastMsg, err := st.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil // no event stored (yet, or any more)
	case err != nil:
		return fmt.Errorf("read the run's last event: %w", err)
	}
	return h.readStoredThrough(ctx, st, subject, tenant, runID, lastMsg.Sequence, storedIdleCheck, fn)
}

// readStoredThrough reads the subject's events through stream sequence
// last (or, when that one is gone, through whatever the stream holds when
// nothing arrives for idle).
func (h *Hub) readStoredThrough(ctx context.Context, st jetstream.Stream, subject, tenant, runID string, last uint64, idle time.Duration, fn func(*Entry) error) error {
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(feedPullMessages))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()

	var o storedOrder
	for {
		msg, err := it.Next(jetstream.NextMaxWait(idle))
		if errors.Is(err, nats.ErrTimeout) {
			// Nothing for a while: if the stream has nothing more for
			// the consumer, the snapshot's last event expired meanwhile.
			if info, ierr := cons.Info(ctx); ierr == nil && info.NumPending == 0 {
				return o.flush(fn)
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read events: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			h.m.badEvents.Inc()
			continue
		}
		if e, err := decodeEntry(nil, tenant, runID, msg.Data(), meta.Sequence.Stream, meta.Timestamp); err != nil {
			h.m.badEvents.Inc()
		} else if err := o.offer(e, fn); err != nil {
			return err
		}
		// The snapshot ends at the last event stored when the read began,
		// or earlier when that one has expired meanwhile.
		if meta.Sequence.Stream >= last || meta.NumPending == 0 {
			return o.flush(fn)
		}
	}
}

// storedIdleCheck is how long ReadStored waits for the next event before
// it asks whether any is left.
const storedIdleCheck = 2 * time.Second

// storedOrder puts a read's events in seq order, as feed.offer does for a
// feed: duplicates dropped, an event ahead of a missing seq held until the
// gap fills, the read ends or maxHeld are held (the gap is then accepted).
type storedOrder struct {
	last uint64
	held map[uint64]*Entry
}

func (o *storedOrder) offer(e *Entry, fn func(*Entry) error) error {
	switch {
	case e.Seq <= o.last:
		return nil
	case o.last == 0 || e.Seq == o.last+1:
		if err := o.emit(e, fn); err != nil {
			return err
		}
		for next := o.held[o.last+1]; next != nil; next = o.held[o.last+1] {
			delete(o.held, next.Seq)
			if err := o.emit(next, fn); err != nil {
				return err
			}
		}
		return nil
	}
	if o.held == nil {
		o.held = map[uint64]*Entry{}
	}
	o.held[e.Seq] = e
	if len(o.held) > maxHeld {
		return o.flush(fn)
	}
	return nil
}

func (o *storedOrder) emit(e *Entry, fn func(*Entry) error) error {
	o.last = e.Seq
	return fn(e)
}

// flush emits the held events in seq order.
func (o *storedOrder) flush(fn func(*Entry) error) error {
	seqs := make([]uint64, 0, len(o.held))
	for s := range o.held {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		e := o.held[s]
		delete(o.held, s)
		if e.Seq <= o.last {
			continue
		}
		if err := o.emit(e, fn); err != nil {
			return err
		}
	}
	return nil
}
