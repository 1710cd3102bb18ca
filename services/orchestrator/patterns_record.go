package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator/internal/patterntrace"
	"github.com/baagent/baagent/services/orchestrator/internal/publish"
)

// Recording a finished run's interaction trace. The trace is built from
// the run's stored events, read back from the events stream when the run
// ends: the stream is the run's durable record, written before any
// checkpoint that depends on it and repaired when a replica resumes the
// run (event_tail.go), so the trace covers every execution of the run —
// before a crash, before a wait for the user — without adding state to
// the checkpoints (which a trace kept in memory would have to carry on
// every write to survive a crash).

// Bounds of reading the events back.
const (
	// traceEventsMax is the most events a trace reads; a longer run's trace
	// is built from its first ones and its end.
	traceEventsMax = 20000
)

// Outcomes of a trace, the label of pattern_traces_total.
const (
	traceQueued = "queued" // published to the capture queue
	traceFailed = "failed" // not published: the run is not learned from
)

// captureTrace queues the trace of the ending run for the memory service:
// a top-level run of an orchestrator with a memory service, whatever its
// end (terminal is the terminal event about to be published). Like
// captureEpisode it publishes before the terminal event, with Nats-Msg-Id
// `trace:<run_id>`: a crash in between ends the run again and publishes
// again, which the stream and the memory service (once per run id) both
// answer with the first. A failure is logged and counted, never the run's.
func (r *run) captureTrace(terminal *baagentv1.Event) {
	if r.s.opts.Memory == nil || r.rec.GetParentRunId() != "" || r.pub == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), finalizeTimeout)
	defer cancel()
	err := r.publishTrace(ctx, terminal)
	if err != nil {
		r.s.metrics.patterns.traces.WithLabelValues(traceFailed).Inc()
		r.log.Error("run's interaction trace not queued; patterns will not learn from it", "error", err)
		return
	}
	r.s.metrics.patterns.traces.WithLabelValues(traceQueued).Inc()
	r.log.Debug("run's interaction trace queued")
}

func (r *run) publishTrace(ctx context.Context, terminal *baagentv1.Event) error {
	tr := patterntrace.Run{RunID: r.rec.GetRunId(), ConversationID: r.rec.GetConversationId(), Goal: r.rec.GetInput()}
	if r.rec.GetStartedAt() != nil { // a run that never started has no duration
		tr.Started, tr.Ended = r.rec.GetStartedAt().AsTime(), time.Now()
	}
	b := patterntrace.New(tr)
	if err := r.pub.Flush(ctx); err != nil {
		return fmt.Errorf("store the run's events: %w", err)
	}
	if err := r.readEvents(ctx, b.Add); err != nil {
		return err
	}
	b.Add(terminal)
	tenant, conv := r.rec.GetTenant(), r.rec.GetConversationId()
	subj, err := natsx.MemoryCaptureSubject(tenant, conv)
	if err != nil {
		return err
	}
	data, err := proto.Marshal(&baagentv1.RecordTraceRequest{Tenant: tenant, Trace: b.Trace()})
	if err != nil {
		return err
	}
	_, err = natsx.Call(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, "trace:"+r.rec.GetRunId())
		msg.Header.Set(natsx.CaptureKindHeader, natsx.CaptureKindTrace)
		return r.s.opts.JetStream.PublishMsg(ctx, msg, jetstream.WithExpectStream(natsx.StreamMemoryCapture))
	})
	if err != nil {
		return fmt.Errorf("publish to %s: %w", natsx.StreamMemoryCapture, err)
	}
	return nil
}

// readEvents passes the run's stored events to add, in order (at most
// traceEventsMax; an event that cannot be read is skipped). It reads them
// by sequence, without a consumer: a run's end creates no server state.
func (r *run) readEvents(ctx context.Context, add func(*baagentv1.Event)) error {
	subject, err := natsx.EventSubject(r.rec.GetTenant(), r.rec.GetRunId())
	if err != nil {
		return err
	}
	stream, err := r.s.opts.JetStream.Stream(ctx, natsx.StreamEvents)
	if err != nil {
		return fmt.Errorf("events stream: %w", err)
	}
	n := 0
	err = publish.Walk(ctx, stream, subject, 0, func(m *jetstream.RawStreamMsg) bool {
		ev := &baagentv1.Event{}
		if proto.Unmarshal(m.Data, ev) == nil {
			add(ev)
		}
		n++
		return n < traceEventsMax
	})
	if err != nil {
		return fmt.Errorf("read the run's events: %w", err)
	}
	if n == traceEventsMax {
		r.log.Warn("run's trace built from its first events only", "events", traceEventsMax)
	}
	return nil
}
