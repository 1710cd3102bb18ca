package publish

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/retry"
)

// Fenced publishing. A run that delegates to sub-agents shares its subject
// with their mirrors (package mirror), which append the sub-agents' events
// with the run's next seq while it works. Pipelined publishing cannot share
// a seq counter, so once the run may have a sub-agent working it publishes
// fenced: one event at a time, each expected to follow the subject's last
// stored message (Nats-Expected-Last-Subject-Sequence). When another writer
// got in first the publish is refused; the publisher reads the subject's
// last event, takes the seq after it and tries again. The seqs stay
// contiguous whoever writes, at the price of a round trip per event, paid
// only by delegating runs.

// maxFenceRounds bounds how often one event yields to other writers.
const maxFenceRounds = 256

// Fence switches the publisher to fenced publishing, after storing every
// event emitted so far. It is not switched back.
func (p *Publisher) Fence(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced {
		return nil
	}
	if err := p.flushLocked(ctx); err != nil {
		return err
	}
	p.fenced = true
	return nil
}

// Fenced reports whether the publisher publishes fenced.
func (p *Publisher) Fenced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fenced
}

// addFencedLocked stores f at once (send) or keeps it for the next flush.
func (p *Publisher) addFencedLocked(ctx context.Context, f *inflight, ev *baagentv1.Event, send bool) error {
	f.ev = ev
	p.seq = f.seq
	p.pending = append(p.pending, f)
	if !send {
		return nil
	}
	return p.flushFencedLocked(ctx)
}

// flushFencedLocked stores the pending events in order, each after the
// subject's last message.
func (p *Publisher) flushFencedLocked(ctx context.Context) error {
	for len(p.pending) > 0 {
		f := p.pending[0]
		if err := p.publishFencedLocked(ctx, f); err != nil {
			if ctx.Err() == nil {
				p.broken = err
			}
			return err
		}
		p.pending = p.pending[1:]
		p.terminal = p.terminal || runevent.IsTerminal(f.ev)
	}
	p.pending = nil
	p.seq = p.acked
	return nil
}

// publishFencedLocked stores f right after the last stored event (p.acked
// at p.lastPos), renumbering it when another writer appended first.
func (p *Publisher) publishFencedLocked(ctx context.Context, f *inflight) error {
	var lastErr error
	failures := 0
	for range maxFenceRounds {
		if f.seq != p.acked+1 {
			if err := p.renumber(f, p.acked+1); err != nil {
				return err
			}
		}
		ack, err := p.sink.PublishMsg(ctx, f.msg, jetstream.WithExpectLastSequencePerSubject(p.lastPos))
		if err == nil {
			// A duplicate is this very event, stored by an attempt whose
			// ack was lost: its Nats-Msg-Id names its seq.
			f.pos = ack.Sequence
			p.acked, p.lastPos = f.seq, f.pos
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish %s event %d: %w", f.typ, f.seq, ctx.Err())
		}
		if IsWrongLastSequence(err) {
			// Another writer appended, or an earlier attempt of this very
			// publish was stored and its ack lost (the server checks the
			// expected sequence before the Nats-Msg-Id): look at what
			// follows the last event known.
			mine, seq, pos, terr := p.after(ctx, f.msg.Header.Get(jetstream.MsgIDHeader))
			if terr != nil {
				return terr
			}
			if mine != 0 {
				f.pos = mine
			}
			p.acked, p.lastPos = seq, pos
			if mine != 0 {
				return nil
			}
			continue
		}
		lastErr = err
		failures++
		if failures >= publishAttempts {
			break
		}
		if !retry.Sleep(ctx, time.Duration(failures)*100*time.Millisecond) {
			return fmt.Errorf("publish %s event %d: %w (last error: %v)", f.typ, f.seq, ctx.Err(), lastErr)
		}
	}
	if lastErr == nil {
		lastErr = errors.New("other writers kept appending")
	}
	return fmt.Errorf("publish %s event %d to %s: %w", f.typ, f.seq, p.subject, lastErr)
}

// renumber makes f the event seq.
func (p *Publisher) renumber(f *inflight, seq uint64) error {
	f.ev.Seq = seq
	f.ev.Cursor = strconv.FormatUint(seq, 10)
	data, err := proto.Marshal(f.ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", f.typ, err)
	}
	f.seq, f.msg.Data = seq, data
	f.msg.Header.Set(jetstream.MsgIDHeader, runevent.MsgID(p.base.RunId, seq)+p.idSuffix)
	return nil
}

// after reads the events stored after the last one known (p.lastPos): the
// position of the one published as msgID (0 if none is) and the seq and
// position of the last.
func (p *Publisher) after(ctx context.Context, msgID string) (mine, seq, pos uint64, err error) {
	stream, err := p.sink.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read the run's last events: %w", err)
	}
	seq, pos = p.acked, p.lastPos
	err = Walk(ctx, stream, p.subject, p.lastPos, func(m *jetstream.RawStreamMsg) bool {
		ev := &baagentv1.Event{}
		if proto.Unmarshal(m.Data, ev) != nil {
			return true // not an event; the run's reader drops it
		}
		if m.Header.Get(jetstream.MsgIDHeader) == msgID {
			mine = m.Sequence
		}
		seq, pos = ev.GetSeq(), m.Sequence
		return true
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read the run's last events: %w", err)
	}
	return mine, seq, pos, nil
}

// Walk calls fn with each message on subject stored after stream sequence
// after, in order, until fn returns false or none is left.
func Walk(ctx context.Context, stream jetstream.Stream, subject string, after uint64, fn func(*jetstream.RawStreamMsg) bool) error {
	for next := after + 1; ; {
		m, err := stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fn(m) {
			return nil
		}
		next = m.Sequence + 1
	}
}

// LastEvent returns the last event on subject and its stream sequence (nil
// when there is none).
func LastEvent(ctx context.Context, stream jetstream.Stream, subject string) (*baagentv1.Event, uint64, error) {
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the last event of %s: %w", subject, err)
	}
	ev := &baagentv1.Event{}
	if err := proto.Unmarshal(msg.Data, ev); err != nil {
		return nil, 0, fmt.Errorf("the last event of %s is unreadable: %w", subject, err)
	}
	return ev, msg.Sequence, nil
}

// IsWrongLastSequence reports whether err is JetStream refusing a publish
// whose expected last subject sequence is no longer the last.
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
