// Package mirror copies a sub-agent run's events into its parent run's
// stream, so that a client following the parent sees the delegated work
// live (docs/concepts/events.md#sub-agent-events).
package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/retry"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
)

// How a child's events reach its parent's stream. The execution of the
// child runs one Mirror: it reads the child's own stream in order and
// appends every event but the deltas (thought_delta, text_delta) to the
// parent's subject, numbered with the parent's next seq and tagged with
// subagent_run_id. The parent (fenced, see package publish) and each of its
// children append to the same subject, so every append is conditional on
// the subject's last message (Nats-Expected-Last-Subject-Sequence); a
// writer that loses the race reads the new last event and tries again.
// Seqs stay contiguous, whoever writes.
//
// Exactly once. Each copy carries the Nats-Msg-Id
// runevent.MirrorMsgID(parent, child, child_seq), so two executions of the
// child copying the same event (one taking over from the other) store it
// once, and the header HeaderMirrorOf, from which an execution that resumes
// the child finds how far the previous one got (Start with Resumed) and
// copies only what follows. The child's execution waits for the copies of
// its events before it ends (Wait), so a parent woken by its child's end
// finds all of them before it appends anything of its own.
//
// Nothing is copied after the parent's terminal event: a parent that has
// ended (cancelled while its child worked) keeps exactly one terminal event
// at the end of its stream.

// HeaderMirrorOf names, on a copy in the parent's stream, the child event it
// copies: "<child_run_id>:<child_seq>".
const HeaderMirrorOf = "Baagent-Mirror-Of"

const (
	// maxRaceRounds bounds how often one copy yields to other writers.
	maxRaceRounds = 256
	// maxBackoff caps the wait between attempts after a NATS failure.
	maxBackoff = 2 * time.Second
	// clockSkew widens the search of a resumed child for its copies.
	clockSkew = time.Minute
)

// errParentEnded: the parent's stream ends with its terminal event.
var errParentEnded = errors.New("the parent run has ended")

// Config says which child's events go where.
type Config struct {
	JetStream jetstream.JetStream
	Tenant    string
	Parent    string // run id of the parent
	Child     string // run id of the child
	// Resumed says an earlier execution of the child may have copied some
	// of its events; Since (the child's creation) bounds the search for
	// them in the parent's stream.
	Resumed bool
	Since   time.Time
	Log     *slog.Logger
}

// Mirror copies one child's events while the child's execution lasts.
type Mirror struct {
	cfg           Config
	stream        jetstream.Stream
	parentSubject string
	childSubject  string
	cancel        context.CancelFunc
	stopped       chan struct{}

	mu      sync.Mutex
	done    uint64        // the child's events handled, up to this seq
	changed chan struct{} // closed (and replaced) when done moves
	ended   bool          // the parent has ended: nothing more is copied
}

// Start finds where copying resumes and starts copying in the background,
// until Stop.
func Start(ctx context.Context, cfg Config) (*Mirror, error) {
	parentSubject, err := natsx.EventSubject(cfg.Tenant, cfg.Parent)
	if err != nil {
		return nil, err
	}
	childSubject, err := natsx.EventSubject(cfg.Tenant, cfg.Child)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	stream, err := cfg.JetStream.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		return nil, fmt.Errorf("events stream: %w", err)
	}
	m := &Mirror{
		cfg: cfg, stream: stream, parentSubject: parentSubject, childSubject: childSubject,
		stopped: make(chan struct{}), changed: make(chan struct{}),
	}
	if cfg.Resumed {
		if m.done, err = m.copied(ctx); err != nil {
			return nil, err
		}
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	go m.pump(run)
	return m, nil
}

// Stop stops copying and returns once the background work is over.
func (m *Mirror) Stop() {
	m.cancel()
	<-m.stopped
}

// Done returns the child's seq up to which every event is handled (copied,
// or a delta, or not copied because the parent has ended).
func (m *Mirror) Done() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Wait returns once the child's events up to seq are handled, ctx ends or
// the mirror stops.
func (m *Mirror) Wait(ctx context.Context, seq uint64) error {
	for {
		m.mu.Lock()
		done, changed := m.done, m.changed
		m.mu.Unlock()
		if done >= seq {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("sub-agent events up to %d not mirrored (mirrored up to %d): %w", seq, done, ctx.Err())
		case <-m.stopped:
			return fmt.Errorf("sub-agent events up to %d not mirrored (mirrored up to %d): mirror stopped", seq, done)
		}
	}
}

// copied returns the highest child seq an earlier execution copied: the
// parent's events since the child was created are read for HeaderMirrorOf.
func (m *Mirror) copied(ctx context.Context) (uint64, error) {
	last, err := m.stream.GetLastMsgForSubject(ctx, m.parentSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the parent's last event: %w", err)
	}
	cons, err := m.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{m.parentSubject},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   new(m.cfg.Since.Add(-clockSkew)),
	})
	if err != nil {
		return 0, fmt.Errorf("read the parent's events: %w", err)
	}
	var hw uint64
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("read the parent's events: %w", err)
		}
		if child, seq, ok := ParseMirrorOf(msg.Headers().Get(HeaderMirrorOf)); ok && child == m.cfg.Child && seq > hw {
			hw = seq
		}
		meta, err := msg.Metadata()
		if err != nil {
			return 0, fmt.Errorf("read the parent's events: %w", err)
		}
		if meta.Sequence.Stream >= last.Sequence {
			return hw, nil
		}
	}
}

// ParseMirrorOf reads a HeaderMirrorOf value.
func ParseMirrorOf(v string) (child string, seq uint64, ok bool) {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(v[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return v[:i], seq, true
}

// pump copies the child's events in seq order until ctx ends.
func (m *Mirror) pump(ctx context.Context) {
	defer close(m.stopped)
	cons, err := m.consumer(ctx)
	if err != nil {
		return
	}
	failures := 0
	for ctx.Err() == nil {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			m.cfg.Log.Warn("sub-agent events not read for mirroring; retrying", "error", err)
			if !retry.Sleep(ctx, backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		ev := &baagentv1.Event{}
		if proto.Unmarshal(msg.Data(), ev) != nil {
			continue
		}
		m.mu.Lock()
		next, ended := m.done+1, m.ended
		m.mu.Unlock()
		// An event already handled, or one stored after a hole: the
		// publisher deletes it and stores it again after the missing one.
		if ev.GetSeq() != next {
			continue
		}
		if !ended && !runevent.IsDelta(ev) {
			switch err := m.copy(ctx, ev); {
			case errors.Is(err, errParentEnded):
				ended = true
			case err != nil:
				return // ctx ended
			}
		}
		m.advance(ev.GetSeq(), ended)
	}
}

// consumer reads the child's events from the first, retrying NATS
// failures until ctx ends.
func (m *Mirror) consumer(ctx context.Context) (jetstream.Consumer, error) {
	for failures := 1; ; failures++ {
		cons, err := m.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{m.childSubject}})
		if err == nil {
			return cons, nil
		}
		m.cfg.Log.Warn("sub-agent events cannot be read for mirroring; retrying", "error", err)
		if !retry.Sleep(ctx, backoff(failures)) {
			return nil, ctx.Err()
		}
	}
}

func (m *Mirror) advance(seq uint64, ended bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done, m.ended = seq, ended
	close(m.changed)
	m.changed = make(chan struct{})
}

// copy appends ev to the parent's stream after its last event, retrying
// NATS failures until ctx ends.
func (m *Mirror) copy(ctx context.Context, ev *baagentv1.Event) error {
	failures, races := 0, 0
	for {
		err := m.copyOnce(ctx, ev)
		switch {
		case err == nil || errors.Is(err, errParentEnded):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case publish.IsWrongLastSequence(err) && races < maxRaceRounds:
			races++ // another writer got in first
			continue
		}
		failures++
		m.cfg.Log.Warn("sub-agent event not mirrored into the parent's stream; retrying", "child_seq", ev.GetSeq(), "error", err)
		if !retry.Sleep(ctx, backoff(failures)) {
			return ctx.Err()
		}
	}
}

func (m *Mirror) copyOnce(ctx context.Context, ev *baagentv1.Event) error {
	last, pos, err := publish.LastEvent(ctx, m.stream, m.parentSubject)
	if err != nil {
		return err
	}
	if last == nil || runevent.IsTerminal(last) {
		// Ended (or its events are no longer retained): nothing may follow.
		return errParentEnded
	}
	data, err := proto.Marshal(Copy(ev, last))
	if err != nil {
		return fmt.Errorf("encode a mirrored %s event: %w", ev.GetType(), err)
	}
	msg := &nats.Msg{Subject: m.parentSubject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, runevent.MirrorMsgID(m.cfg.Parent, m.cfg.Child, ev.GetSeq()))
	msg.Header.Set(HeaderMirrorOf, m.cfg.Child+":"+strconv.FormatUint(ev.GetSeq(), 10))
	// A copy stored by another execution of the child is a duplicate
	// (same Nats-Msg-Id): its ack names the stored copy.
	_, err = m.cfg.JetStream.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(pos))
	return err
}

// Copy is the child's event ev as the event after last in the parent's
// stream: the parent's envelope (ids, seq, cursor), the child's step,
// time and payload, and subagent_run_id naming the run that produced it
// (kept from ev when ev is itself a copy from a deeper sub-agent).
func Copy(ev, last *baagentv1.Event) *baagentv1.Event {
	out := proto.CloneOf(ev)
	if out.SubagentRunId == "" {
		out.SubagentRunId = ev.GetRunId()
	}
	out.RunId = last.GetRunId()
	out.ConversationId = last.GetConversationId()
	out.Tenant = last.GetTenant()
	out.ParentRunId = last.GetParentRunId()
	out.TraceId = last.GetTraceId()
	out.Seq = last.GetSeq() + 1
	out.Cursor = strconv.FormatUint(out.Seq, 10)
	return out
}

func backoff(failures int) time.Duration {
	return min(time.Duration(failures)*100*time.Millisecond, maxBackoff)
}
