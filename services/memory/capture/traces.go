package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

func traceMetrics() (*prometheus.CounterVec, prometheus.Histogram) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baagent", Subsystem: "memory_capture", Name: "traces_total",
		Help: "Deliveries of finished runs' interaction traces to memory, by outcome (stored, skipped, retried, dropped).",
	}, []string{"outcome"})
	for _, o := range []string{outcomeStored, outcomeSkipped, outcomeRetried, outcomeDropped} {
		total.WithLabelValues(o)
	}
	return total, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "baagent", Subsystem: "memory_capture", Name: "record_trace_seconds",
		Help:    "Time of the RecordTrace call of one trace delivery.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
}

// DecodeTrace reads a trace request delivered on subject and checks it
// against the subject it came on: the tenant and the trace's conversation
// must match it, the run id must be a valid token and the goal present.
// Lengths are the memory service's to bound: it cuts an oversized trace
// rather than refusing it.
func DecodeTrace(subject string, data []byte) (*baagentv1.RecordTraceRequest, error) {
	tenant, conv, err := natsx.ParseMemoryCaptureSubject(subject)
	if err != nil {
		return nil, err
	}
	req := &baagentv1.RecordTraceRequest{}
	if err := proto.Unmarshal(data, req); err != nil {
		return nil, fmt.Errorf("unreadable trace request: %w", err)
	}
	tr := req.GetTrace()
	switch {
	case req.GetTenant() != tenant:
		return nil, fmt.Errorf("trace request for tenant %q came on the subject of tenant %q", req.GetTenant(), tenant)
	case tr == nil:
		return nil, errors.New("trace request has no trace")
	case tr.GetConversationId() != conv:
		return nil, fmt.Errorf("trace for conversation %q came on the subject of conversation %q", tr.GetConversationId(), conv)
	case tr.GetUserGoal() == "":
		return nil, errors.New("trace has no goal")
	}
	if err := natsx.ValidateToken("run_id", tr.GetRunId()); err != nil {
		return nil, fmt.Errorf("trace request: %w", err)
	}
	return req, nil
}

// handleTrace delivers one trace to the memory service and settles it
// with the episodes' rules. A trace has no withdrawal: deleting a
// conversation deletes its recorded traces, and what a trace taught the
// tenant's patterns is the tenant's, scrubbed, not the conversation's.
func (c *Consumer) handleTrace(ctx context.Context, msg jetstream.Msg, delivered int) {
	req, err := DecodeTrace(msg.Subject(), msg.Data())
	if err != nil {
		c.log.Error("memory capture: dropping a malformed trace", "subject", msg.Subject(), "error", err)
		c.settleTrace(ctx, msg, outcomeDropped, 0)
		return
	}
	log := c.log.With("tenant", req.GetTenant(), "conversation_id", req.GetTrace().GetConversationId(),
		"run_id", req.GetTrace().GetRunId(), "delivery", delivered, "kind", natsx.CaptureKindTrace)
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	began := time.Now()
	resp, err := c.opts.Memory.RecordTrace(cctx, req)
	cancel()
	c.traceDuration.Observe(time.Since(began).Seconds())
	switch {
	case err == nil && resp.GetSkipped():
		log.Debug("trace not learned: patterns are switched off for its tenant or conversation")
		c.settleTrace(ctx, msg, outcomeSkipped, 0)
	case err == nil:
		log.Info("trace recorded", "pattern_id", resp.GetPatternId(), "created", resp.GetCreated(), "duplicate", resp.GetDuplicate())
		c.settleTrace(ctx, msg, outcomeStored, 0)
	default:
		if outcome, delay, ok := c.failed(ctx, log, err, delivered, "trace", "the trace is not learned"); ok {
			c.settleTrace(ctx, msg, outcome, delay)
		} else {
			_ = msg.Nak()
		}
	}
}

// settleTrace settles a trace delivery as settle does an episode's and
// counts it among the traces.
func (c *Consumer) settleTrace(ctx context.Context, msg jetstream.Msg, outcome string, delay time.Duration) {
	// A lost acknowledgement is a redelivery, which RecordTrace answers as
	// a duplicate of the run's trace.
	if err := ack(ctx, msg, outcome, delay); err != nil {
		c.log.Warn("memory capture: trace acknowledgement not delivered", "outcome", outcome, "error", err)
	}
	c.traces.WithLabelValues(outcome).Inc()
}
