// Package capture turns finished runs into memory episodes, durably.
//
// When a top-level run completes, the orchestrator publishes a capture
// request to the JetStream work-queue stream natsx.StreamMemoryCapture on
// natsx.MemoryCaptureSubject(tenant, conversation), with Nats-Msg-Id set
// to the run id (so a retried publish is stored once). The request is a
// baagent.v1.AddEpisodeRequest in protobuf wire format: the tenant, the
// conversation, the run, the episode's text, source RUN and the run id as
// its idempotency key.
//
// A Consumer pulls those requests from one durable consumer shared by every
// memory replica and calls MemoryService.AddEpisode for each. It
// acknowledges a request once the memory service has stored (or, by the
// tenant's or conversation's switches, skipped) it; a request the service
// could not take now (unavailable, overloaded, deadline) is delivered again
// after a growing delay, up to MaxDeliver times; one it can never take (not
// a valid request, refused as invalid) is terminated and logged. The
// idempotency key makes a redelivery after a lost acknowledgement harmless:
// the memory service returns the first episode instead of adding another.
//
// The same queue carries finished runs' interaction traces: a message
// whose natsx.CaptureKindHeader is natsx.CaptureKindTrace holds a
// baagent.v1.RecordTraceRequest (Nats-Msg-Id "trace:<run id>"), which the
// Consumer hands to MemoryService.RecordTrace under the same retry and
// termination rules; the memory service records a run's trace once.
package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	basemetrics "github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/retry"
)

// ConsumerName is the durable consumer every memory replica shares.
const ConsumerName = "memory-capture"

// Limits of a capture request (those of AddEpisodeRequest).
const (
	MaxContentBytes        = 64 << 10
	MaxIdempotencyKeyBytes = 128
)

// Defaults of [Options].
const (
	DefaultMaxDeliver  = 12
	DefaultCallTimeout = 30 * time.Second
	DefaultWorkers     = 2
	DefaultMaxBackoff  = 5 * time.Minute
	defaultFirstDelay  = time.Second
)

// Options configures a Consumer.
type Options struct {
	// JetStream holds the capture stream (natsx.Provision creates it);
	// required.
	JetStream jetstream.JetStream
	// Memory stores the episodes; required.
	Memory baagentv1.MemoryServiceClient
	// Logger receives the logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the collectors (baagent_memory_capture_*); nil
	// registers none.
	Registerer prometheus.Registerer
	// MaxDeliver bounds the deliveries of one request (default 12); after
	// the last failed one the request is terminated and logged.
	MaxDeliver int
	// CallTimeout bounds one AddEpisode call (default 30 s).
	CallTimeout time.Duration
	// FirstDelay is the wait before the first redelivery of a request the
	// memory service could not take (default 1 s); it doubles with each
	// delivery up to MaxBackoff (default 5 minutes).
	FirstDelay time.Duration
	MaxBackoff time.Duration
	// Workers bounds the requests handled at once (default 2).
	Workers int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.FirstDelay <= 0 {
		o.FirstDelay = defaultFirstDelay
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.FirstDelay {
		o.MaxBackoff = o.FirstDelay
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	return o
}

// Outcomes of a delivery, the label of baagent_memory_capture_total.
const (
	outcomeStored  = "stored"  // AddEpisode stored it (or had it already)
	outcomeSkipped = "skipped" // memory is switched off for the tenant or conversation
	outcomeRetried = "retried" // the memory service could not take it now; delivered again later
	outcomeDropped = "dropped" // not a valid request, refused, or out of deliveries: terminated
	// The conversation was deleted during the capture: the request was
	// purged and the episode stored meanwhile deleted.
	outcomeWithdrawn = "withdrawn"
)

// Consumer consumes the capture stream. Run owns its goroutines.
type Consumer struct {
	opts     Options
	log      *slog.Logger
	total    *prometheus.CounterVec
	duration prometheus.Histogram
	// traces and traceDuration are the trace kind's (traces.go).
	traces        *prometheus.CounterVec
	traceDuration prometheus.Histogram
}

// New returns a Consumer; it fails when a required option is missing or
// the metrics cannot be registered.
func New(opts Options) (*Consumer, error) {
	opts = opts.withDefaults()
	if opts.JetStream == nil {
		return nil, errors.New("capture: Options.JetStream is not set")
	}
	if opts.Memory == nil {
		return nil, errors.New("capture: Options.Memory is not set")
	}
	c := &Consumer{
		opts: opts,
		log:  opts.Logger.With("component", "memory-capture"),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "memory_capture", Name: "total",
			Help: "Deliveries of finished runs to memory, by outcome (stored, skipped, retried, dropped).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "baagent", Subsystem: "memory_capture", Name: "add_episode_seconds",
			Help:    "Time of the AddEpisode call of one capture delivery.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
	}
	for _, o := range []string{outcomeStored, outcomeSkipped, outcomeRetried, outcomeDropped, outcomeWithdrawn} {
		c.total.WithLabelValues(o)
	}
	c.traces, c.traceDuration = traceMetrics()
	if err := basemetrics.RegisterExclusive(opts.Registerer, "memory capture", c.total, c.duration, c.traces, c.traceDuration); err != nil {
		return nil, err
	}
	return c, nil
}

// Run consumes capture requests until ctx is done, then waits for the
// requests in hand and returns nil. A stream that is not there yet (the
// capture stream is provisioned by whichever service starts first) is
// waited for.
func (c *Consumer) Run(ctx context.Context) error {
	var cons jetstream.Consumer
	for {
		cc, err := c.ensureConsumer(ctx)
		if err == nil {
			cons = cc
			break
		}
		c.log.Warn("memory capture consumer unavailable; retrying", "error", err)
		if !retry.Sleep(ctx, time.Second) {
			return nil
		}
	}
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() { c.consume(ctx, cons) })
	}
	wg.Wait()
	return nil
}

func (c *Consumer) ensureConsumer(ctx context.Context) (jetstream.Consumer, error) {
	return natsx.Call(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return c.opts.JetStream.CreateOrUpdateConsumer(ctx, natsx.StreamMemoryCapture, jetstream.ConsumerConfig{
			Durable:     ConsumerName,
			Description: "memory replicas turning finished runs into episodes",
			AckPolicy:   jetstream.AckExplicitPolicy,
			// Past the call's own timeout: a request in hand is not
			// handed to another replica while its call can still succeed.
			AckWait:       2*c.opts.CallTimeout + 5*time.Second,
			MaxDeliver:    c.opts.MaxDeliver,
			FilterSubject: natsx.MemoryCaptureSubjects,
		})
	})
}

func (c *Consumer) consume(ctx context.Context, cons jetstream.Consumer) {
	natsx.Consume(ctx, cons, c.log, "memory capture", func(msg jetstream.Msg) { c.handle(ctx, msg) })
}

// Decode reads a capture request delivered on subject and checks it
// against the subject it came on: the tenant and conversation must match,
// the content and idempotency key must be present and within bounds. The
// source is always RUN.
func Decode(subject string, data []byte) (*baagentv1.AddEpisodeRequest, error) {
	tenant, conv, err := natsx.ParseMemoryCaptureSubject(subject)
	if err != nil {
		return nil, err
	}
	req := &baagentv1.AddEpisodeRequest{}
	if err := proto.Unmarshal(data, req); err != nil {
		return nil, fmt.Errorf("unreadable capture request: %w", err)
	}
	switch {
	case req.GetTenant() != tenant:
		return nil, fmt.Errorf("capture request for tenant %q came on the subject of tenant %q", req.GetTenant(), tenant)
	case req.GetConversationId() != conv:
		return nil, fmt.Errorf("capture request for conversation %q came on the subject of conversation %q", req.GetConversationId(), conv)
	case req.GetContent() == "":
		return nil, errors.New("capture request has no content")
	case len(req.GetContent()) > MaxContentBytes:
		return nil, fmt.Errorf("capture request content is %d bytes; the maximum is %d", len(req.GetContent()), MaxContentBytes)
	case req.GetIdempotencyKey() == "":
		return nil, errors.New("capture request has no idempotency key")
	case len(req.GetIdempotencyKey()) > MaxIdempotencyKeyBytes:
		return nil, fmt.Errorf("capture request idempotency key is %d bytes; the maximum is %d", len(req.GetIdempotencyKey()), MaxIdempotencyKeyBytes)
	}
	if err := natsx.ValidateToken("run_id", req.GetRunId()); err != nil {
		return nil, fmt.Errorf("capture request: %w", err)
	}
	req.Source = baagentv1.EpisodeSource_EPISODE_SOURCE_RUN
	req.Wait = false
	return req, nil
}

// handle delivers one request to the memory service and settles it.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	delivered := 1
	if meta, err := msg.Metadata(); err == nil {
		delivered = int(meta.NumDelivered) //nolint:gosec // a delivery count
	}
	switch kind := msg.Headers().Get(natsx.CaptureKindHeader); kind {
	case "", natsx.CaptureKindEpisode:
	case natsx.CaptureKindTrace:
		c.handleTrace(ctx, msg, delivered)
		return
	default:
		c.log.Error("memory capture: dropping a request of an unknown kind", "subject", msg.Subject(), "kind", kind)
		c.settle(ctx, msg, outcomeDropped, 0)
		return
	}
	req, err := Decode(msg.Subject(), msg.Data())
	if err != nil {
		c.log.Error("memory capture: dropping a malformed request", "subject", msg.Subject(), "error", err)
		c.settle(ctx, msg, outcomeDropped, 0)
		return
	}
	log := c.log.With("tenant", req.GetTenant(), "conversation_id", req.GetConversationId(), "run_id", req.GetRunId(), "delivery", delivered)
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	began := time.Now()
	resp, err := c.opts.Memory.AddEpisode(cctx, req)
	cancel()
	c.duration.Observe(time.Since(began).Seconds())
	switch {
	case err == nil && resp.GetSkipped():
		log.Debug("run not captured: memory is switched off for its tenant or conversation")
		c.settle(ctx, msg, outcomeSkipped, 0)
	case err == nil && c.purgedMeanwhile(ctx, msg):
		// The conversation was deleted while the episode was being
		// stored: its deletion purged this request and may have run
		// before the episode existed, so the episode goes here.
		c.withdraw(ctx, log, req.GetTenant(), resp.GetEpisode().GetId())
		c.settle(ctx, msg, outcomeWithdrawn, 0)
	case err == nil:
		log.Info("run captured as a memory episode", "episode_id", resp.GetEpisode().GetId(), "redactions", resp.GetEpisode().GetRedactions())
		c.settle(ctx, msg, outcomeStored, 0)
	default:
		if outcome, delay, ok := c.failed(ctx, log, err, delivered, "request", "the run is not remembered"); ok {
			c.settle(ctx, msg, outcome, delay)
		} else {
			_ = msg.Nak()
		}
	}
}

// failed applies the retry policy to a delivery whose memory call failed
// with err: dropped when the memory service refused it for good or it is
// out of deliveries, retried after a growing delay otherwise; ok is false
// when shutting down, the delivery then going back to the queue untouched.
func (c *Consumer) failed(ctx context.Context, log *slog.Logger, err error, delivered int, what, lost string) (outcome string, delay time.Duration, ok bool) {
	switch {
	case ctx.Err() != nil:
		return "", 0, false
	case !transient(err):
		log.Error("memory capture: the memory service refused the "+what+"; dropped", "error", err)
		return outcomeDropped, 0, true
	case delivered >= c.opts.MaxDeliver:
		log.Error("memory capture: out of deliveries; "+lost, "deliveries", delivered, "error", err)
		return outcomeDropped, 0, true
	}
	delay = Backoff(delivered, c.opts.FirstDelay, c.opts.MaxBackoff)
	log.Warn("memory capture: memory service unavailable; "+what+" delivered again later", "delay", delay, "error", err)
	return outcomeRetried, delay, true
}

// purgedMeanwhile reports whether msg left the stream while it was being
// handled: only a purge removes an unacknowledged work-queue message, and
// deleting a conversation purges its capture requests before it deletes
// the conversation's episodes. Whichever comes first, the episode cannot
// survive the deletion: stored before the episodes were deleted, it was
// deleted with them; stored after, the purge came before this check.
func (c *Consumer) purgedMeanwhile(ctx context.Context, msg jetstream.Msg) bool {
	meta, err := msg.Metadata()
	if err != nil {
		return false
	}
	_, err = natsx.Call(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		st, err := c.opts.JetStream.Stream(ctx, natsx.StreamMemoryCapture)
		if err != nil {
			return nil, err
		}
		return st.GetMsg(ctx, meta.Sequence.Stream)
	})
	return errors.Is(err, jetstream.ErrMsgNotFound)
}

// withdraw deletes an episode stored for a conversation deleted meanwhile.
func (c *Consumer) withdraw(ctx context.Context, log *slog.Logger, tenant, id string) {
	if id == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.CallTimeout)
	defer cancel()
	_, err := c.opts.Memory.DeleteEpisode(cctx, &baagentv1.DeleteEpisodeRequest{Tenant: tenant, Id: id})
	if err != nil && status.Code(err) != codes.NotFound {
		log.Error("memory capture: the conversation was deleted during capture and its episode could not be removed", "episode_id", id, "error", err)
		return
	}
	log.Info("memory capture: the conversation was deleted during capture; its episode was removed", "episode_id", id)
}

// settle acknowledges (stored, skipped), terminates (dropped) or
// negatively acknowledges with delay (retried) msg, and counts it.
func (c *Consumer) settle(ctx context.Context, msg jetstream.Msg, outcome string, delay time.Duration) {
	// An acknowledgement lost here is a redelivery later, which the
	// idempotency key answers with the stored episode.
	if err := ack(ctx, msg, outcome, delay); err != nil {
		c.log.Warn("memory capture: acknowledgement not delivered", "outcome", outcome, "error", err)
	}
	c.total.WithLabelValues(outcome).Inc()
}

// ack settles one delivery by its outcome: acknowledged (stored or
// skipped), terminated (dropped), nothing (withdrawn: purged meanwhile),
// or negatively acknowledged with delay (to be retried).
func ack(ctx context.Context, msg jetstream.Msg, outcome string, delay time.Duration) error {
	switch outcome {
	case outcomeWithdrawn:
		return nil
	case outcomeStored, outcomeSkipped:
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return msg.DoubleAck(actx)
	case outcomeDropped:
		return msg.Term()
	}
	return msg.NakWithDelay(delay)
}

// transient reports whether a failed AddEpisode may succeed later.
// Unimplemented is a replica of a version without memory (a rolling
// upgrade): a later delivery may reach one with it.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
		codes.Internal, codes.Unknown, codes.Canceled, codes.Unimplemented:
		return true
	}
	return false
}

// Backoff is the wait before delivery n+1 of a request whose delivery n
// failed: first, doubled per delivery, at most limit.
func Backoff(n int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
