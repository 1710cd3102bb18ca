// Package contextsvc is the ContextService: conversation history
// (append-only, durable in JetStream) and the context window for a model
// call, compressed at query time within a token budget without rewriting
// history (see
// docs/concepts/context-compression.md).
//
// History lives in the stream natsx.StreamHistory, one subject per
// conversation; a bounded in-memory copy of recent conversations, checked
// against the stream on every call, keeps window building fast. Tokens are
// counted by the tokens service, cached per message, so rebuilding a window
// after one append counts one message. Summaries are computed in the
// background by an OpenAI-compatible model (Server.Run works the queue) and
// cached by content hash; windows use extracts until they are ready.
//
// The context_compressed payload is returned in BuildWindowResponse and not
// published here: an event's seq is contiguous per run and owned by the
// orchestrator, which publishes it in order with the run's other events.
package contextsvc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.ContextService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.ContextService"

// Defaults of [Options].
const (
	// DefaultMaxMessages bounds AppendRequest.messages and
	// BuildWindowRequest.system_messages.
	DefaultMaxMessages = 1000
	// DefaultMaxMessageBytes bounds each text field of a message (4 MiB).
	DefaultMaxMessageBytes = 4 << 20
	// DefaultMaxRecordBytes bounds one stored message: NATS's default
	// maximum payload (1 MiB) less room for headers.
	DefaultMaxRecordBytes = 1<<20 - 4<<10
	// DefaultCachedConversations and DefaultCacheBytes bound the in-memory
	// copy of history.
	DefaultCachedConversations = 1024
	DefaultCacheBytes          = 512 << 20
	// DefaultCountCacheEntries bounds the token count cache.
	DefaultCountCacheEntries = 200_000
	// DefaultSummaryCacheEntries bounds the summary cache (its
	// max_entries).
	DefaultSummaryCacheEntries = 1000
	// DefaultSummaryQueue and DefaultSummaryWorkers size the background
	// summarization.
	DefaultSummaryQueue   = 64
	DefaultSummaryWorkers = 2
	// DefaultPageSize is GetHistory's page size when the request has none.
	DefaultPageSize = 100
)

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the service's Prometheus collectors
	// (baagent_context_*); nil registers nothing.
	Registerer prometheus.Registerer
	// JetStream holds the history (stream natsx.StreamHistory, provisioned
	// by natsx.Provision). Required: without it every RPC fails with
	// FailedPrecondition.
	JetStream jetstream.JetStream
	// Tokens counts tokens and describes models (the tokens service client).
	// Required for BuildWindow.
	Tokens TokenCounter
	// Summarizer computes SUMMARIZE summaries; nil leaves SUMMARIZE to fall
	// back to EXTRACT (and say so). Summaries run only while Run runs.
	Summarizer Summarizer
	// SummarizerModel is the model summaries use unless a request names one.
	SummarizerModel string
	// SummaryWorkers, SummaryQueue, SummaryCacheEntries and
	// SummaryCallTimeout size background summarization.
	SummaryWorkers      int
	SummaryQueue        int
	SummaryCacheEntries int
	SummaryCallTimeout  time.Duration
	// CachedConversations and CacheBytes bound the in-memory history copy.
	CachedConversations int
	CacheBytes          int64
	// CountCacheEntries bounds the token count cache.
	CountCacheEntries int
	// MaxMessages bounds AppendRequest.messages and
	// BuildWindowRequest.system_messages (default 1000).
	MaxMessages int
	// MaxMessageBytes bounds each text field (content, reasoning_content,
	// tool call arguments) of each message of AppendRequest.messages and
	// BuildWindowRequest.system_messages (default 4 MiB).
	MaxMessageBytes int
	// MaxRecordBytes bounds one stored message; keep it below the NATS
	// server's max_payload (default 1 MiB less 4 KiB).
	MaxRecordBytes int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxMessages, DefaultMaxMessages)
	def(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	def(&o.MaxRecordBytes, DefaultMaxRecordBytes)
	def(&o.CachedConversations, DefaultCachedConversations)
	def(&o.CountCacheEntries, DefaultCountCacheEntries)
	def(&o.SummaryCacheEntries, DefaultSummaryCacheEntries)
	def(&o.SummaryQueue, DefaultSummaryQueue)
	def(&o.SummaryWorkers, DefaultSummaryWorkers)
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.SummaryCallTimeout <= 0 {
		o.SummaryCallTimeout = summaryCallTimeout
	}
	return o
}

// Server implements baagentv1.ContextServiceServer.
type Server struct {
	baagentv1.UnimplementedContextServiceServer

	opts      Options
	log       *slog.Logger
	metrics   *metrics
	store     *historyStore
	counter   *counter
	summaries *summaries
}

var _ baagentv1.ContextServiceServer = (*Server)(nil)

// New returns a Server configured by opts. Missing dependencies are not an
// error here, so that the service can be constructed before they are wired;
// the RPCs that need them answer FailedPrecondition naming what is missing.
// A metrics registration failure is logged and the metrics stay unregistered.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	log := opts.Logger.With("service", ServiceName)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		log.Error("context metrics not registered", "err", err)
		m, _ = newMetrics(nil)
	}
	s := &Server{opts: opts, log: log, metrics: m}
	if opts.JetStream != nil {
		s.store = newHistoryStore(opts.JetStream, log, opts.CachedConversations, opts.CacheBytes, opts.MaxRecordBytes)
	}
	if opts.Tokens != nil {
		s.counter = newCounter(opts.Tokens, opts.CountCacheEntries, m)
	}
	s.summaries = newSummaries(opts.Summarizer, s.counter, log, m, opts)
	return s
}

// Register registers the ContextService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterContextServiceServer(gs, s)
}

// Run computes background summaries until ctx is done. Without Run (or
// without a Summarizer) SUMMARIZE falls back to EXTRACT.
func (s *Server) Run(ctx context.Context) error {
	if s.opts.Summarizer != nil && s.counter == nil {
		s.log.Warn("summaries disabled: no tokens service to size summarizer prompts")
	} else if s.opts.Summarizer != nil {
		s.summaries.run(ctx)
		return nil
	}
	<-ctx.Done()
	return nil
}

// Append appends messages to a conversation, idempotently by message id.
func (s *Server) Append(ctx context.Context, req *baagentv1.AppendRequest) (*baagentv1.AppendResponse, error) {
	if err := s.validateAppend(req); err != nil {
		return nil, s.rejected(ctx, "Append", err)
	}
	if s.store == nil {
		return nil, notConfigured("a history store (JetStream)")
	}
	res, err := s.store.append(ctx, convKey{req.GetTenant(), req.GetConversationId()}, req.GetMessages())
	var tooLarge *recordTooLargeError
	if errors.As(err, &tooLarge) {
		var e validate.Errors
		e.Add(validate.Index("messages", tooLarge.index), tooLarge.Error())
		return nil, s.rejected(ctx, "Append", e.Err())
	}
	if err != nil {
		return nil, storeError(err)
	}
	s.metrics.appended.Add(float64(res.appended))
	s.metrics.duplicates.Add(float64(res.duplicates))
	return &baagentv1.AppendResponse{
		Appended:     int32(res.appended),
		Duplicates:   int32(res.duplicates),
		MessageCount: int64(res.count),
		MessageIds:   res.ids,
	}, nil
}

// GetHistory reads a page of a conversation's history, oldest first.
func (s *Server) GetHistory(ctx context.Context, req *baagentv1.GetHistoryRequest) (*baagentv1.GetHistoryResponse, error) {
	if err := validateGetHistory(req); err != nil {
		return nil, s.rejected(ctx, "GetHistory", err)
	}
	after, err := parsePageToken(req.GetPageToken())
	if err != nil {
		var e validate.Errors
		e.Add("page_token", err.Error())
		return nil, s.rejected(ctx, "GetHistory", e.Err())
	}
	if s.store == nil {
		return nil, notConfigured("a history store (JetStream)")
	}
	msgs, err := s.store.snapshot(ctx, convKey{req.GetTenant(), req.GetConversationId()})
	if err != nil {
		return nil, storeError(err)
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = DefaultPageSize
	}
	start := firstAfter(msgs, after)
	end := min(len(msgs), start+size)
	resp := &baagentv1.GetHistoryResponse{TotalCount: int64(len(msgs)), Messages: make([]*baagentv1.ChatMessage, 0, end-start)}
	for _, m := range msgs[start:end] {
		resp.Messages = append(resp.Messages, m.msg)
	}
	if end < len(msgs) {
		resp.NextPageToken = encodePageToken(msgs[end-1].seq)
	}
	return resp, nil
}

// firstAfter is the index of the first message stored after sequence seq.
func firstAfter(msgs []*storedMsg, seq uint64) int {
	lo, hi := 0, len(msgs)
	for lo < hi {
		mid := (lo + hi) / 2
		if msgs[mid].seq <= seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// DeleteConversation deletes a conversation's history and its summaries.
func (s *Server) DeleteConversation(ctx context.Context, req *baagentv1.DeleteConversationRequest) (*baagentv1.DeleteConversationResponse, error) {
	if err := validateDeleteConversation(req); err != nil {
		return nil, s.rejected(ctx, "DeleteConversation", err)
	}
	if s.store == nil {
		return nil, notConfigured("a history store (JetStream)")
	}
	key := convKey{req.GetTenant(), req.GetConversationId()}
	n, err := s.store.delete(ctx, key)
	if err != nil {
		return nil, storeError(err)
	}
	s.summaries.forget(key)
	s.log.InfoContext(ctx, "conversation deleted", "tenant", key.tenant, "conversation_id", key.id, "messages", n)
	return &baagentv1.DeleteConversationResponse{DeletedCount: int64(n)}, nil
}

// BuildWindow builds the messages of the next model call within the token
// budget.
func (s *Server) BuildWindow(ctx context.Context, req *baagentv1.BuildWindowRequest) (*baagentv1.BuildWindowResponse, error) {
	if err := s.validateBuildWindow(req); err != nil {
		return nil, s.rejected(ctx, "BuildWindow", err)
	}
	switch {
	case s.store == nil:
		return nil, notConfigured("a history store (JetStream)")
	case s.counter == nil:
		return nil, notConfigured("a tokens service client")
	}
	return s.buildWindow(ctx, req)
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

func notConfigured(what string) error {
	return status.Errorf(codes.FailedPrecondition, "the context service was started without %s", what)
}

// storeError maps a history store failure to a status.
func storeError(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, errConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, errNoStore):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Errorf(codes.Unavailable, "history store: %v", err)
}
