package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/services/orchestrator/internal/runstore"
)

// The run queue. StartRun publishes a work item on the work-queue stream
// natsx.StreamRuns (subject natsx.RunSubject, body the RunSpec, Nats-Msg-Id
// the run id); every replica pulls from one shared durable consumer, so
// each item is delivered to one replica at a time. The executing replica
// keeps the item in progress (heartbeats every AckWait/3) and acknowledges
// it when the run has ended. If the replica dies, the heartbeats stop, the
// item is redelivered after AckWait to another replica, which resumes the
// run from its checkpoint. On a graceful shutdown the replica hands its
// runs back at once (a negative acknowledgement).

// runsConsumer is the durable consumer the replicas share.
const runsConsumer = "orchestrator"

// DefaultRunAckWait is how long a run's work item stays with a replica
// without a heartbeat: the failover time after a crash.
const DefaultRunAckWait = 6 * time.Second

// DefaultMaxRunsPerTenant bounds a tenant's runs queued or in progress.
const DefaultMaxRunsPerTenant = 32

// adoptRetryDelay is how long a delivery this replica could not take (it
// executes the run already, or is shutting down) waits to come back.
const adoptRetryDelay = 250 * time.Millisecond

// runsStream returns the work-queue stream.
func (s *Server) runsStream(ctx context.Context) (jetstream.Stream, error) {
	st, err := s.opts.JetStream.Stream(ctx, natsx.StreamRuns)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "run queue unavailable: stream %s (is JetStream provisioned?): %v", natsx.StreamRuns, err)
	}
	return st, nil
}

// admit refuses a run beyond the tenant's limit or the queue's: it counts
// the work items of the tenant (queued or in progress on any replica) and
// of everyone. The count is read before the item is published, so
// concurrent starts may exceed a limit by the number of racing calls.
func (s *Server) admit(ctx context.Context, tenant string) error {
	st, err := s.runsStream(ctx)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf("baagent.runs.%s.*", tenant)))
	if err != nil {
		return status.Errorf(codes.Unavailable, "run queue: %v", err)
	}
	var mine uint64
	for _, n := range info.State.Subjects {
		mine += n
	}
	switch {
	case mine >= uint64(s.opts.MaxRunsPerTenant):
		return status.Errorf(codes.ResourceExhausted,
			"tenant %s already has %d runs queued or in progress (the limit is %d); wait for one to finish or cancel one", tenant, mine, s.opts.MaxRunsPerTenant)
	case info.State.Msgs >= uint64(s.opts.MaxQueuedRuns):
		return status.Errorf(codes.ResourceExhausted,
			"the run queue holds %d runs (the limit is %d); retry later", info.State.Msgs, s.opts.MaxQueuedRuns)
	}
	return nil
}

// enqueue publishes rec's work item.
func (s *Server) enqueue(ctx context.Context, rec *baagentv1.Run, spec *baagentv1.RunSpec) error {
	subject, err := natsx.RunSubject(rec.GetTenant(), rec.GetRunId())
	if err != nil {
		return err
	}
	data, err := proto.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode run spec: %w", err)
	}
	msg := &nats.Msg{Subject: subject, Data: data}
	// The run's executions join the trace of the call that queued it.
	tracing.Inject(ctx, msg)
	_, err = s.opts.JetStream.PublishMsg(ctx, msg, jetstream.WithMsgID(rec.GetRunId()))
	return err
}

// parseRunSubject splits "baagent.runs.<tenant>.<run_id>".
func parseRunSubject(subject string) (tenant, runID string, err error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != "baagent" || parts[1] != "runs" || parts[2] == "" || parts[3] == "" {
		return "", "", fmt.Errorf("not a run subject: %q", subject)
	}
	return parts[2], parts[3], nil
}

// consume pulls work items on one worker until ctx ends.
func (s *Server) consume(ctx context.Context, cons jetstream.Consumer) {
	natsx.Consume(ctx, cons, s.log, "run queue", s.handle)
}

// handle executes one delivered work item.
func (s *Server) handle(msg jetstream.Msg) {
	tenant, runID, err := parseRunSubject(msg.Subject())
	if err != nil {
		s.log.Error("run queue: dropping a malformed work item", "subject", msg.Subject(), "error", err)
		_ = msg.Term()
		return
	}
	attempt, workSeq := 1, uint64(0)
	if meta, err := msg.Metadata(); err == nil {
		attempt, workSeq = int(meta.NumDelivered), meta.Sequence.Stream
	}
	spec := &baagentv1.RunSpec{}
	if err := proto.Unmarshal(msg.Data(), spec); err != nil {
		s.log.Error("run queue: dropping a work item with an unreadable spec", "run_id", runID, "error", err)
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithTimeout(s.base, finalizeTimeout)
	store, err := s.runStore(ctx)
	var rec *baagentv1.Run
	if err == nil {
		rec, _, err = store.Get(ctx, tenant, runID)
	}
	cancel()
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		s.log.Error("run queue: dropping the work item of an unknown run", "tenant", tenant, "run_id", runID)
		_ = msg.Term()
		return
	case err != nil:
		s.log.Warn("run queue: run record unreadable; the run is retried later", "run_id", runID, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	case isFinished(rec.GetState()):
		_ = msg.Ack()
		return
	}
	r, ok := s.adopt(rec, spec, attempt, workSeq, msg.Headers())
	if !ok { // shutting down, or already executing here (a stale delivery)
		// Not at once: a delivery that finds the run executing here would
		// come back in a tight loop until that execution ends.
		_ = msg.NakWithDelay(adoptRetryDelay)
		return
	}
	stop := s.heartbeat(r, msg)
	outcome := r.execute()
	stop()
	r.endTrace(outcome)
	switch outcome {
	case outcomeEnded:
		if err := msg.DoubleAck(context.WithoutCancel(r.ctx)); err != nil {
			r.log.Warn("run queue: work item not acknowledged; a replica will find the run finished", "error", err)
		}
	case outcomeHandedBack:
		_ = msg.Nak()
	case outcomeWaiting:
		// Back at the question's deadline (or sooner, replaced by an
		// answered run's new item); nothing waits here meanwhile.
		_ = msg.NakWithDelay(max(time.Until(r.wait.Deadline), 0) + 100*time.Millisecond)
	case outcomeLost:
		// Another replica holds the item now; nothing to acknowledge.
	}
}

// adopt registers an executing run on this replica.
func (s *Server) adopt(rec *baagentv1.Run, spec *baagentv1.RunSpec, attempt int, workSeq uint64, h nats.Header) (*run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.runs[rec.GetRunId()] != nil {
		return nil, false
	}
	r := newRun(s, rec, spec)
	r.attempt, r.workSeq = attempt, workSeq
	r.startTrace(h)
	s.runs[rec.GetRunId()] = r
	return r, true
}

// heartbeat keeps msg in progress while r executes; the returned function
// stops it and waits for it.
func (s *Server) heartbeat(r *run, msg jetstream.Msg) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(s.opts.RunAckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					r.log.Warn("run queue: heartbeat failed", "error", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// ensureConsumer creates or updates the shared consumer.
func (s *Server) ensureConsumer(ctx context.Context) (jetstream.Consumer, error) {
	return s.opts.JetStream.CreateOrUpdateConsumer(ctx, natsx.StreamRuns, jetstream.ConsumerConfig{
		Durable:       runsConsumer,
		Description:   "orchestrator replicas executing runs",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.RunAckWait,
		MaxDeliver:    -1,
		FilterSubject: natsx.RunsSubjects,
	})
}
