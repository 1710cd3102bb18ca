package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
)

// resumeEvents finds where a resumed run's events continue. Everything up
// to the checkpoint's last_seq is stored in order; after it, the replica
// that died may have stored more events (pipelined, so possibly with a
// hole). The contiguous prefix after the checkpoint is kept — those events
// happened — and anything after a hole is deleted; the run continues with
// the next seq, under Nats-Msg-Ids of its own attempt, after publishing
// again the checkpoint's unconfirmed events (its outbox) that are not in
// the kept prefix. It returns the terminal event when the stored events
// end with one.
func (r *run) resumeEvents(ctx context.Context, cp *checkpoint.State) (*baagentv1.Event, error) {
	seq, pos := r.rec.GetLastSeq(), uint64(0)
	if cp != nil && cp.LastSeq >= seq {
		seq, pos = cp.LastSeq, cp.LastPos
	}
	if seq > 0 && pos == 0 {
		// A record's last_seq without its position: start from the first
		// event of the run and skip up to it.
		seq = 0
	}
	subject, err := natsx.EventSubject(r.rec.GetTenant(), r.rec.GetRunId())
	if err != nil {
		return nil, err
	}
	stream, err := r.s.opts.JetStream.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("events stream: %w", err)
	}
	suffix := ":a" + strconv.Itoa(r.attempt)
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && last.Sequence <= pos) {
		r.pub.ContinueAfter(seq, pos, suffix)
		return r.republishOutbox(ctx, cp)
	}
	if err != nil {
		return nil, fmt.Errorf("read the run's last event: %w", err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	if pos > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = pos + 1
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read the run's events: %w", err)
	}
	var terminal *baagentv1.Event
	var stale []uint64 // stream sequences after a hole
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("read the run's events: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("read the run's events: %w", err)
		}
		at := meta.Sequence.Stream
		ev := &baagentv1.Event{}
		switch {
		case len(stale) > 0 || terminal != nil:
			stale = append(stale, at)
		case proto.Unmarshal(msg.Data(), ev) != nil:
			stale = append(stale, at)
		case ev.GetSeq() <= seq:
			// Up to the checkpoint (a run resumed from its record only).
		case ev.GetSeq() == seq+1:
			seq, pos = ev.GetSeq(), at
			if runevent.IsTerminal(ev) {
				terminal = ev
			}
		default:
			stale = append(stale, at)
		}
		if at >= last.Sequence {
			break
		}
	}
	for _, at := range stale {
		if err := stream.DeleteMsg(ctx, at); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("delete an event stored after a hole: %w", err)
		}
	}
	if len(stale) > 0 {
		r.log.Warn("deleted events a failed replica stored after a hole", "count", len(stale), "continuing_after_seq", seq)
	}
	r.pub.ContinueAfter(seq, pos, suffix)
	if terminal != nil {
		return terminal, nil
	}
	return r.republishOutbox(ctx, cp)
}

// republishOutbox stores the checkpoint's unconfirmed events the stream
// lacks.
func (r *run) republishOutbox(ctx context.Context, cp *checkpoint.State) (*baagentv1.Event, error) {
	if cp == nil || len(cp.Outbox) == 0 {
		return nil, nil
	}
	from := r.pub.LastSeq()
	terminal, err := r.pub.Republish(ctx, cp.Outbox)
	if err != nil {
		return nil, fmt.Errorf("restore the checkpoint's unconfirmed events: %w", err)
	}
	if to := r.pub.LastSeq(); to > from {
		r.log.Info("published again the checkpoint's events the stream lacked", "from_seq", from+1, "to_seq", to)
	}
	return terminal, nil
}
