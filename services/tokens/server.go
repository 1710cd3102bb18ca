// Package tokens is the TokensService: exact BPE token counting for OpenAI
// encodings and margin-adjusted estimates for other model families (see
// docs/concepts/tokens.md).
//
// A model name resolves through the [Registry] (exact name, glob pattern,
// family detection, conservative fallback) to an encoding and a safety
// margin; the encodings are in the encoding subpackage. Chat requests are
// counted as the OpenAI chat format counts them (see chatFormat), with a
// per-message count cache so that re-counting a growing conversation costs
// only its new messages.
package tokens

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
	"github.com/baagent/baagent/services/tokens/encoding"
	"github.com/baagent/baagent/services/tokens/pricetable"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.TokensService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.TokensService"

// Defaults of [Options].
const (
	// DefaultMaxTextBytes bounds a text to count or encode (16 MiB).
	DefaultMaxTextBytes = 16 << 20
	// DefaultMaxMessages bounds the messages of one CountMessages request.
	DefaultMaxMessages = 10_000
	// DefaultMaxTokenIDs bounds the token ids of one Decode request (4 Mi).
	DefaultMaxTokenIDs = 4 << 20
	// DefaultParallelThreshold is the text size from which CountTokens
	// counts on every core (128 KiB).
	DefaultParallelThreshold = 128 << 10
	// DefaultMaxStreamBytes bounds the text of one CountTokensStream call
	// (1 GiB).
	DefaultMaxStreamBytes = 1 << 30
)

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the service's Prometheus collectors
	// (baagent_tokens_*); nil registers nothing.
	Registerer prometheus.Registerer
	// EncodersFile is a token_encoders.yaml overlaid on the built-in registry;
	// empty uses the built-in registry alone. An invalid file fails New.
	EncodersFile string
	// CacheEntries bounds the count cache (default 65536 entries).
	CacheEntries int
	// ExactCounter counts through provider APIs for entries with
	// use_exact_counting; nil uses an [AnthropicCounter] reading API keys
	// from the environment.
	ExactCounter ExactCounter
	// MaxTextBytes bounds CountTokensRequest.text, EncodeRequest.text and each
	// text field of a CountMessagesRequest message (default 16 MiB).
	MaxTextBytes int
	// MaxMessages bounds CountMessagesRequest.messages (default 10000).
	MaxMessages int
	// MaxTokenIDs bounds DecodeRequest.tokens (default 4 Mi).
	MaxTokenIDs int
	// CountWorkers is how many goroutines count one large text, shared by
	// all calls (default GOMAXPROCS).
	CountWorkers int
	// ParallelThreshold is the text size from which CountTokens cuts the
	// text at safe cut points and counts the parts on CountWorkers
	// goroutines (default 128 KiB).
	ParallelThreshold int
	// MaxStreamBytes bounds the text of one CountTokensStream call
	// (default 1 GiB).
	MaxStreamBytes int64
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	if o.ExactCounter == nil {
		o.ExactCounter = AnthropicCounter{Getenv: os.Getenv}
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.MaxTokenIDs <= 0 {
		o.MaxTokenIDs = DefaultMaxTokenIDs
	}
	if o.ParallelThreshold <= 0 {
		o.ParallelThreshold = DefaultParallelThreshold
	}
	if o.MaxStreamBytes <= 0 {
		o.MaxStreamBytes = DefaultMaxStreamBytes
	}
	return o
}

// Server implements baagentv1.TokensServiceServer. It is safe for
// concurrent use: the registry and encoders are immutable and the cache
// locks.
type Server struct {
	baagentv1.UnimplementedTokensServiceServer

	opts     Options
	log      *slog.Logger
	encoders *encoding.Set
	registry *Registry
	cache    *countCache
	metrics  *metrics
	pool     *encoding.Pool
}

var _ baagentv1.TokensServiceServer = (*Server)(nil)

// New returns a Server configured by opts. It loads the vocabularies (about a
// second of CPU) and opts.EncodersFile, and registers the metrics.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	log := opts.Logger.With("service", ServiceName)
	encoders, models := defaultEncoders(), defaultModelMetadata()
	if opts.EncodersFile != "" {
		cfg, err := LoadConfigFile(opts.EncodersFile)
		if err != nil {
			return nil, err
		}
		encoders, models = cfg.merge(encoders, models)
		log.Info("token encoders loaded", "file", opts.EncodersFile, "encoders", len(cfg.Encoders), "models", len(cfg.Models))
	}
	prices, err := pricetable.Builtin()
	if err != nil {
		return nil, err
	}
	log.Debug("built-in prices loaded", "models", len(prices))
	set, err := encoding.NewSet()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{
		opts:     opts,
		log:      log,
		encoders: set,
		registry: NewRegistry(encoders, models).WithPrices(pricetable.NewTable(prices)),
		cache:    newCountCache(opts.CacheEntries, m),
		metrics:  m,
		pool:     encoding.NewPool(opts.CountWorkers),
	}, nil
}

// Register registers the TokensService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterTokensServiceServer(gs, s)
}

// Registry returns the model registry the server resolves names with.
func (s *Server) Registry() *Registry { return s.registry }

// resolve finds a model's resolution and its encoder. Every encoding in the
// registry was validated, so a missing encoder is a bug, reported Internal.
func (s *Server) resolve(model string) (Resolution, encoding.Encoder, error) {
	res := s.registry.Resolve(model)
	enc, err := s.encoders.Get(res.Config.Encoding)
	if err != nil {
		return res, nil, status.Errorf(codes.Internal, "model %q: %v", model, err)
	}
	return res, enc, nil
}

// CountTokens counts the tokens of a text for a model.
func (s *Server) CountTokens(ctx context.Context, req *baagentv1.CountTokensRequest) (*baagentv1.CountTokensResponse, error) {
	if err := s.validateCountTokens(req); err != nil {
		return nil, s.rejected(ctx, "CountTokens", err)
	}
	res, enc, err := s.resolve(req.GetModel())
	if err != nil {
		return nil, err
	}
	cfg := res.Config
	resp := &baagentv1.CountTokensResponse{
		EncodingName: cfg.Encoding,
		SafetyMargin: cfg.SafetyMargin,
		IsEstimate:   cfg.IsEstimate(),
		ModelFamily:  cfg.Family,
		Source:       baagentv1.CountSource_COUNT_SOURCE_LOCAL,
	}
	if cfg.UseExactCounting && req.GetText() != "" && s.opts.ExactCounter.Available(cfg) {
		n, err := s.opts.ExactCounter.CountText(ctx, cfg, req.GetModel(), req.GetText())
		if err == nil {
			// The provider's count is the truth: no margin, no estimate.
			resp.Count, resp.RawCount, resp.SafetyMargin, resp.IsEstimate = n, n, 1.0, false
			resp.Source = baagentv1.CountSource_COUNT_SOURCE_PROVIDER_API
			return resp, nil
		}
		s.metrics.exactFallbacks.Inc()
		s.log.WarnContext(ctx, "provider token count failed; using the local estimate", "model", req.GetModel(), "error", err)
		resp.Source = baagentv1.CountSource_COUNT_SOURCE_LOCAL_FALLBACK
	}
	n, err := s.countText(ctx, enc, req.GetText(), req.GetAllowSpecialTokens())
	if err != nil {
		return nil, err
	}
	resp.RawCount = int64(n)
	resp.Count = applyMargin(resp.RawCount, cfg.SafetyMargin)
	return resp, nil
}

// countText counts text locally: at ParallelThreshold bytes and above in
// parts on the pool's workers (the same count, see encoding.Pool), below on
// the calling goroutine.
func (s *Server) countText(ctx context.Context, enc encoding.Encoder, text string, allowSpecial bool) (int, error) {
	var (
		n   int
		err error
	)
	if len(text) >= s.opts.ParallelThreshold {
		s.metrics.parallelCounts.Inc()
		n, err = s.pool.Count(ctx, enc, text, allowSpecial)
	} else {
		n, err = enc.Count(text, allowSpecial)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, status.FromContextError(ctxErr).Err()
		}
		return 0, status.Errorf(codes.Internal, "count: %v", err)
	}
	return n, nil
}

// CountMessages counts a chat request as the OpenAI chat format counts it.
// It always counts locally: a provider API, where configured, is used by
// CountTokens only (its answer has no per-message breakdown).
func (s *Server) CountMessages(ctx context.Context, req *baagentv1.CountMessagesRequest) (*baagentv1.CountMessagesResponse, error) {
	if err := s.validateCountMessages(req); err != nil {
		return nil, s.rejected(ctx, "CountMessages", err)
	}
	res, enc, err := s.resolve(req.GetModel())
	if err != nil {
		return nil, err
	}
	cc := chatCounter{enc: enc, f: chatFormatFor(enc.Name()), cache: s.cache}
	counted, err := cc.count(req.GetMessages(), req.GetTools())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "count: %v", err)
	}
	raw := counted.total()
	return &baagentv1.CountMessagesResponse{
		Count:              applyMargin(raw, res.Config.SafetyMargin),
		RawCount:           raw,
		MessageRawCounts:   counted.messages,
		ToolsRawCount:      counted.tools,
		ReplyPrimingTokens: counted.replyPriming,
		EncodingName:       enc.Name(),
		SafetyMargin:       res.Config.SafetyMargin,
		IsEstimate:         res.Config.IsEstimate(),
		CacheHits:          counted.hits,
		CacheMisses:        counted.misses,
	}, nil
}

// encoderFor returns the encoder a request's `encoder` oneof names. An
// unknown encoding name is the caller's error, InvalidArgument.
func (s *Server) encoderFor(model, encodingName string) (encoding.Encoder, error) {
	if model != "" {
		_, enc, err := s.resolve(model)
		return enc, err
	}
	enc, err := s.encoders.Get(encodingName)
	if err != nil {
		var e validate.Errors
		e.Addf("encoding_name", "unknown encoding %q; supported: %v", encodingName, encoding.Names())
		return nil, e.Err()
	}
	return enc, nil
}

// Encode returns the token ids of a text.
func (s *Server) Encode(ctx context.Context, req *baagentv1.EncodeRequest) (*baagentv1.EncodeResponse, error) {
	if err := s.validateEncode(req); err != nil {
		return nil, s.rejected(ctx, "Encode", err)
	}
	enc, err := s.encoderFor(req.GetModel(), req.GetEncodingName())
	if err != nil {
		return nil, s.rejected(ctx, "Encode", err)
	}
	ids, err := enc.Encode(req.GetText(), req.GetAllowSpecialTokens())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode: %v", err)
	}
	return &baagentv1.EncodeResponse{Tokens: ids, EncodingName: enc.Name()}, nil
}

// Decode returns the text of token ids.
func (s *Server) Decode(ctx context.Context, req *baagentv1.DecodeRequest) (*baagentv1.DecodeResponse, error) {
	if err := s.validateDecode(req); err != nil {
		return nil, s.rejected(ctx, "Decode", err)
	}
	enc, err := s.encoderFor(req.GetModel(), req.GetEncodingName())
	if err != nil {
		return nil, s.rejected(ctx, "Decode", err)
	}
	raw, err := enc.Decode(req.GetTokens())
	if errors.Is(err, encoding.ErrInvalidToken) {
		var e validate.Errors
		e.Add("tokens", err.Error())
		return nil, s.rejected(ctx, "Decode", e.Err())
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "decode: %v", err)
	}
	text := encoding.ToValidUTF8(string(raw))
	return &baagentv1.DecodeResponse{Text: text, Raw: raw, ValidUtf8: len(text) == len(raw) && text == string(raw), EncodingName: enc.Name()}, nil
}

// GetModelInfo describes how a model is counted.
func (s *Server) GetModelInfo(ctx context.Context, req *baagentv1.GetModelInfoRequest) (*baagentv1.GetModelInfoResponse, error) {
	if err := s.validateGetModelInfo(req); err != nil {
		return nil, s.rejected(ctx, "GetModelInfo", err)
	}
	return &baagentv1.GetModelInfoResponse{Info: s.modelInfo(s.registry.Resolve(req.GetModel()))}, nil
}

// ListModels lists every configured model and the supported encodings.
func (s *Server) ListModels(context.Context, *baagentv1.ListModelsRequest) (*baagentv1.ListModelsResponse, error) {
	// ListModelsRequest has no fields to validate.
	entries := s.registry.Entries()
	resp := &baagentv1.ListModelsResponse{Models: make([]*baagentv1.ModelInfo, 0, len(entries)), Encodings: encoding.Names()}
	for _, res := range entries {
		resp.Models = append(resp.Models, s.modelInfo(res))
	}
	return resp, nil
}

func (s *Server) modelInfo(res Resolution) *baagentv1.ModelInfo {
	cfg, meta := res.Config, res.Meta
	name := res.Model
	if res.PriceKey != "" {
		name = res.PriceKey
	}
	return &baagentv1.ModelInfo{
		Model:            res.Model,
		ModelFamily:      cfg.Family,
		EncodingName:     cfg.Encoding,
		SafetyMargin:     cfg.SafetyMargin,
		UseExactCounting: cfg.UseExactCounting,
		HasApiClient:     cfg.UseExactCounting && s.opts.ExactCounter.Available(cfg),
		MatchedBy:        res.Match,
		MatchedPattern:   res.Key,
		IsEstimate:       cfg.IsEstimate(),
		Metadata: &baagentv1.ModelMetadata{
			Name:              name,
			ContextLength:     meta.ContextLength,
			MaxOutputTokens:   meta.MaxOutputTokens,
			InputCostPer_1M:   meta.InputCostPer1M,
			OutputCostPer_1M:  meta.OutputCostPer1M,
			Capabilities:      meta.Capabilities,
			SupportsStreaming: meta.SupportsStreaming,
			SupportsJsonMode:  meta.SupportsJSONMode,

			CachedInputCostPer_1M: meta.CachedInputCostPer1M,
			PriceAsOf:             meta.PriceAsOf,
			PriceMaxPromptTokens:  meta.PriceMaxPromptTokens,
		},
	}
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}
