// Package skills is the SkillsService: Agent Skills (SKILL.md folders) in
// three layers (system < tenant < project), disclosed progressively (level 1
// catalog, level 2 instructions, level 3 resources) and activated by the
// scope rule of planActivation on the caller's stack. The SKILL.md rules
// live in the skillmd subpackage, shared with `baagentctl skills validate`.
//
// The skills root holds system skills at the top and tenant and project
// layers under `tenants/` (see the layout in layers.go and the tenant
// configuration in [TenantConfigFile]). [New] loads it once; [Server.Run]
// polls it and swaps in a new immutable snapshot when files change.
package skills

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/skills/store"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.SkillsService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.SkillsService"

// Defaults of [Options].
const (
	// DefaultPollInterval is how often Run checks the root for changes.
	DefaultPollInterval = 2 * time.Second
	// DefaultMaxMessageBytes bounds each text field of a history message.
	DefaultMaxMessageBytes = 4 << 20
	// DefaultMaxHistoryMessages bounds SkillActivationRequest.conversation_history.
	DefaultMaxHistoryMessages = 1000
)

// Options configures a [Server]. Zero values take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the service's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Root is the skills root directory; required. System skills are its
	// folders, tenant and project layers live under `tenants/`.
	Root string
	// PollInterval is how often Run looks for changes (default 2 s).
	PollInterval time.Duration
	// MaxResourceBytes caps a resource file served at level 3 (default
	// 1 MiB): ReadSkillResource refuses larger files, and GetSkill and
	// ActivateSkill at level 3 inline only their first MaxResourceBytes,
	// marked truncated.
	MaxResourceBytes int64
	// Counter counts catalog tokens per model; nil uses [EstimateTokens]. A
	// request without a model, or a failing counter, also uses the estimate.
	Counter TokenCounter
	// MaxMessageBytes bounds each text field of each message of
	// SkillActivationRequest.conversation_history (default 4 MiB).
	MaxMessageBytes int
	// MaxHistoryMessages bounds SkillActivationRequest.conversation_history
	// (default 1000).
	MaxHistoryMessages int
	// Store holds the skills uploaded through the API (PutSkill); nil
	// turns the store off, and its RPCs answer Unimplemented.
	Store *store.Store
}

// Server implements baagentv1.SkillsServiceServer.
type Server struct {
	baagentv1.UnimplementedSkillsServiceServer

	opts    Options
	log     *slog.Logger
	counter TokenCounter
	metrics *metrics
	catalog *catalogCache

	// snap is the skills set in service: the files' snapshot with the
	// store's skills merged in; replaced whole by a reload or a store change.
	snap atomic.Pointer[snapshot]
	// files is the last snapshot loaded from the skills root, before the
	// store's skills are merged in.
	files atomic.Pointer[snapshot]
	store *store.Store

	// reloadMu serialises loads and guards the fields below.
	reloadMu      sync.Mutex
	root          *os.Root
	rootInfo      os.FileInfo
	lastReloadErr string
	// parsed are the stored skills' parsed revisions of the last combine.
	parsed map[parsedKey]parsedSkill

	running       atomic.Bool
	counterFailed atomic.Bool

	// revisions finds skills at older revisions; nil when only the
	// current revision of each skill is kept (files).
	revisions revisionSource
}

var _ baagentv1.SkillsServiceServer = (*Server)(nil)

// New loads the skills root and returns a Server serving it. A skill that
// fails validation does not fail New (it is reported by ListSkills, logged
// and counted); a missing or unreadable root does.
func New(opts Options) (*Server, error) {
	if opts.Root == "" {
		return nil, errors.New("skills: Options.Root is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.MaxResourceBytes <= 0 {
		opts.MaxResourceBytes = DefaultMaxResourceBytes
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxHistoryMessages <= 0 {
		opts.MaxHistoryMessages = DefaultMaxHistoryMessages
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("service", ServiceName),
		counter: opts.Counter,
		metrics: m,
		catalog: newCatalogCache(),
		store:   opts.Store,
	}
	if opts.Store != nil {
		s.revisions = storeRevisions{st: opts.Store, log: s.log}
	}
	if err := s.Reload(); err != nil {
		if opts.Registerer != nil {
			m.unregister(opts.Registerer)
		}
		return nil, fmt.Errorf("skills: %w", err)
	}
	return s, nil
}

// Register registers the SkillsService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterSkillsServiceServer(gs, s)
}

// ListSkills lists the skills a tenant (and project) sees.
func (s *Server) ListSkills(ctx context.Context, req *baagentv1.ListSkillsRequest) (*baagentv1.ListSkillsResponse, error) {
	if err := validateListSkills(req); err != nil {
		return nil, s.rejected(ctx, "ListSkills", err)
	}
	snap := s.snap.Load()
	resp := &baagentv1.ListSkillsResponse{}
	if req.GetScope() != baagentv1.SkillScopeFilter_SKILL_SCOPE_FILTER_UNSPECIFIED {
		resp.Skills = snap.listLayers(req.GetTenant(), req.GetProject(), req.GetScope())
	} else {
		view := snap.view(req.GetTenant(), req.GetProject())
		resp.Skills = make([]*baagentv1.SkillMetadata, len(view))
		for i, sk := range view {
			resp.Skills[i] = sk.metadataProto()
		}
	}
	if req.GetIncludeInvalid() {
		for _, e := range snap.invalid(req.GetTenant(), req.GetProject()) {
			resp.Invalid = append(resp.Invalid, &baagentv1.SkillLoadError{Folder: e.GetFolder(), Scope: e.GetScope(), Reason: e.GetReason()})
		}
	}
	return resp, nil
}

// GetSkill returns one skill at a disclosure level (default metadata).
func (s *Server) GetSkill(ctx context.Context, req *baagentv1.GetSkillRequest) (*baagentv1.GetSkillResponse, error) {
	if err := validateGetSkill(req); err != nil {
		return nil, s.rejected(ctx, "GetSkill", err)
	}
	snap := s.snap.Load()
	sk, err := snap.resolve(req.GetTenant(), req.GetProject(), req.GetName())
	if err != nil {
		return nil, err
	}
	resp := &baagentv1.GetSkillResponse{Metadata: sk.metadataProto()}
	level := req.GetLevel()
	if level >= baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS {
		resp.Body = sk.body
	}
	if level >= baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES {
		if resp.Resources, err = inlineResources(ctx, sk, s.opts.MaxResourceBytes); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// GetCatalog renders the level-1 catalog within a token budget.
func (s *Server) GetCatalog(ctx context.Context, req *baagentv1.GetCatalogRequest) (*baagentv1.GetCatalogResponse, error) {
	if err := validateGetCatalog(req); err != nil {
		return nil, s.rejected(ctx, "GetCatalog", err)
	}
	snap := s.snap.Load()
	key := catalogKey{gen: snap.gen, tenant: req.GetTenant(), project: req.GetProject(), model: req.GetModel(), budget: req.GetTokenBudget()}
	if resp := s.catalog.get(key); resp != nil {
		setTokenSource(ctx, s.plannedSource(req.GetModel())) // only exact counts are cached
		return resp, nil
	}
	budget := int(min(req.GetTokenBudget(), math.MaxInt32))
	exact := true
	res, err := buildCatalog(ctx, catalogSkills(snap.view(req.GetTenant(), req.GetProject())), budget, func(ctx context.Context, text string) (int, error) {
		if !exact {
			// The counter failed earlier in this request: do not wait on
			// it again for each planning round.
			return EstimateTokens(text), nil
		}
		n, ok, err := s.countTokens(ctx, text, req.GetModel())
		exact = ok
		return n, err
	})
	if err != nil {
		return nil, err
	}
	if exact {
		setTokenSource(ctx, s.plannedSource(req.GetModel()))
	} else {
		setTokenSource(ctx, tokenSourceFallback)
	}
	resp := &baagentv1.GetCatalogResponse{
		Text:           res.text,
		Tokens:         int64(res.tokens),
		SkillCount:     int32(res.listed),
		ShortenedCount: int32(res.shortened),
		NameOnlyCount:  int32(res.nameOnlyN),
	}
	if exact { // a fallback estimate is not worth keeping once the counter is back
		s.catalog.put(key, resp)
	}
	return resp, nil
}

// TokenSourceHeader is the GetCatalog response header that says how
// GetCatalogResponse.tokens was counted: "counter" (Options.Counter, for
// the service that is the tokens service's exact count), "estimate" (no
// counter configured or no model named) or "estimate-fallback" (the counter
// failed; the local estimate, which errs high, was used instead).
const TokenSourceHeader = "baagent-token-source"

const (
	tokenSourceCounter  = "counter"
	tokenSourceEstimate = "estimate"
	tokenSourceFallback = "estimate-fallback"
)

// plannedSource is how tokens are counted for model when nothing fails.
func (s *Server) plannedSource(model string) string {
	if s.counter == nil || model == "" {
		return tokenSourceEstimate
	}
	return tokenSourceCounter
}

// setTokenSource sets the TokenSourceHeader: the contract has no field for
// it. Outside a gRPC call (an in-process caller) there is no header to set.
func setTokenSource(ctx context.Context, source string) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(TokenSourceHeader, source))
}

// countTokens counts with the configured counter, falling back to the local
// estimate (which errs high) when there is none, no model is named, or the
// counter fails: a catalog is better sized conservatively than not served.
// ok is false when a configured counter failed.
func (s *Server) countTokens(ctx context.Context, text, model string) (int, bool, error) {
	if s.counter == nil || model == "" {
		return EstimateTokens(text), true, nil
	}
	n, err := s.counter.CountTokens(ctx, text, model)
	if err == nil {
		if s.counterFailed.CompareAndSwap(true, false) {
			s.log.InfoContext(ctx, "skills: token counter recovered")
		}
		return n, true, nil
	}
	if ctx.Err() != nil {
		return 0, false, status.FromContextError(ctx.Err()).Err()
	}
	s.metrics.countFallbacks.Inc()
	if s.counterFailed.CompareAndSwap(false, true) { // log the transition, not every call
		s.log.WarnContext(ctx, "skills: token counter failed; sizing catalogs with the local estimate", "model", model, "error", err)
	}
	return EstimateTokens(text), false, nil
}

// ActivateSkill activates a skill on the caller's activation stack, by the
// rule of planActivation: the result says which skills' scopes end
// (ended, innermost first), the chain after, and whether the skill was
// already active (nothing pushed, no messages).
//
// A refused activation (a cycle, the depth limit, a depth that disagrees
// with the chain, a model activating a skill with disable_model_invocation,
// or a skill the tenant cannot use) is a FailedPrecondition status whose
// message is the activation's error text (`Circular dependency detected:
// a → b → a …`) and whose details carry the ActivateSkillResponse with
// success=false, so a caller reading either gets the reason. An unknown
// skill is NotFound. A refusal ends no scope.
func (s *Server) ActivateSkill(ctx context.Context, req *baagentv1.ActivateSkillRequest) (*baagentv1.ActivateSkillResponse, error) {
	if err := s.validateActivateSkill(req); err != nil {
		return nil, s.rejected(ctx, "ActivateSkill", err)
	}
	a := req.GetActivation()
	snap := s.snap.Load()
	sk, err := snap.resolve(a.GetTenant(), a.GetProject(), a.GetSkillName())
	if err != nil {
		st := status.Convert(err)
		if st.Code() == codes.NotFound {
			s.metrics.activations.WithLabelValues("not_found").Inc()
			return nil, err
		}
		s.metrics.activations.WithLabelValues("unavailable").Inc()
		return nil, activationRefused(a, st)
	}
	origin := a.GetOrigin()
	if origin == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_UNSPECIFIED {
		origin = baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL
	}
	if sk.disableModelInvocation && origin == baagentv1.SkillActivationOrigin_SKILL_ACTIVATION_ORIGIN_MODEL {
		s.metrics.activations.WithLabelValues("model_disabled").Inc()
		return nil, activationRefused(a, status.New(codes.FailedPrecondition, fmt.Sprintf(
			"Skill %q cannot be activated by the model: only the user (/%s in a message) or a trigger may activate it", sk.name, sk.name)))
	}
	plan, err := planActivation(a.GetActivationChain(), int(a.GetActivationDepth()), int(a.GetMaxDepth()), sk.name, func(parent string) bool {
		p, err := snap.resolve(a.GetTenant(), a.GetProject(), parent)
		// A skill that is gone or hidden since it was activated names
		// nothing: its scope ends.
		return err == nil && namesSkill(p.body, sk.name)
	})
	if err != nil {
		result := "mismatch"
		switch {
		case errors.Is(err, ErrCircularDependency):
			result = "cycle"
		case errors.Is(err, ErrMaxDepth):
			result = "depth"
		}
		s.metrics.activations.WithLabelValues(result).Inc()
		return nil, activationRefused(a, status.New(codes.FailedPrecondition, err.Error()))
	}
	res := &baagentv1.SkillActivationResult{
		ActivationId:    a.GetActivationId(),
		SkillName:       sk.name,
		Success:         true,
		ActivationChain: plan.chain,
		Scope:           sk.scope,
		AlreadyActive:   plan.alreadyActive,
		Ended:           plan.ended,
		Revision:        sk.revision,
		Origin:          origin,
	}
	if plan.alreadyActive {
		// The modifier is the skill's, as on its first activation: a
		// caller must not read a missing one as "no restriction".
		res.ContextModifier = contextModifier(sk)
		s.metrics.activations.WithLabelValues("already_active").Inc()
		return &baagentv1.ActivateSkillResponse{Result: res}, nil
	}
	at, note, err := s.atRevision(ctx, sk, a.GetRevision())
	if err != nil {
		return nil, err
	}
	level := a.GetLoadLevel()
	if level == baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_UNSPECIFIED {
		level = baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_INSTRUCTIONS
	}
	var resources []*baagentv1.SkillResource
	if level >= baagentv1.SkillLoadLevel_SKILL_LOAD_LEVEL_RESOURCES {
		if resources, err = inlineResources(ctx, at, s.opts.MaxResourceBytes); err != nil {
			return nil, err
		}
	}
	res.Revision = at.revision
	res.Messages = activationMessages(at, level, resources, note)
	res.ContextModifier = contextModifier(at)
	s.metrics.activations.WithLabelValues("ok").Inc()
	return &baagentv1.ActivateSkillResponse{Result: res}, nil
}

// revisionSource holds skills at revisions other than the current one. The
// file layer keeps only each skill's current revision (its folder as it is
// now); a backend that keeps older revisions (stored skills) sets
// Server.revisions, so that a restored activation and its skill_read calls
// keep reading the files the skill was activated with.
type revisionSource interface {
	// skillAt returns cur (a skill of the current snapshot, as resolved for
	// the caller) at revision; found is false when that revision is not
	// kept. The error is a gRPC status: the backend could not answer.
	skillAt(ctx context.Context, cur *skill, revision string) (sk *skill, found bool, err error)
}

// atRevision returns cur (the skill in the current snapshot) at revision:
// cur itself for "" or its own revision, the kept revision when the
// revisionSource has it, or else cur with a note saying the requested one
// is gone.
func (s *Server) atRevision(ctx context.Context, cur *skill, revision string) (*skill, string, error) {
	if revision == "" || revision == cur.revision {
		return cur, "", nil
	}
	if s.revisions != nil {
		sk, ok, err := s.revisions.skillAt(ctx, cur, revision)
		if err != nil {
			return nil, "", err
		}
		if ok {
			return sk, "", nil
		}
	}
	return cur, fmt.Sprintf("revision %s is no longer available; this is the current revision %s", revision, cur.revision), nil
}

// activationRefused returns st with the failed SkillActivationResult
// attached as a detail.
func activationRefused(a *baagentv1.SkillActivationRequest, st *status.Status) error {
	detailed, err := st.WithDetails(&baagentv1.ActivateSkillResponse{Result: &baagentv1.SkillActivationResult{
		ActivationId:    a.GetActivationId(),
		SkillName:       a.GetSkillName(),
		Success:         false,
		Error:           st.Message(),
		ActivationChain: slices.Clone(a.GetActivationChain()),
		Origin:          a.GetOrigin(),
	}})
	if err != nil {
		return st.Err()
	}
	return detailed.Err()
}

// ReadSkillResource reads one page of a resource file of a skill, by bytes
// or by lines (the skill_read tool). With a revision other than the
// current one it reads that revision while it is kept; a revision no longer
// kept is FailedPrecondition, so that a model never mixes files of two
// revisions without being told.
func (s *Server) ReadSkillResource(ctx context.Context, req *baagentv1.ReadSkillResourceRequest) (*baagentv1.ReadSkillResourceResponse, error) {
	if err := validateReadSkillResource(req); err != nil {
		return nil, s.rejected(ctx, "ReadSkillResource", err)
	}
	snap := s.snap.Load()
	sk, err := snap.resolve(req.GetTenant(), req.GetProject(), req.GetSkillName())
	if err != nil {
		return nil, err
	}
	if rev := req.GetRevision(); rev != "" && rev != sk.revision {
		at, note, err := s.atRevision(ctx, sk, rev)
		if err != nil {
			return nil, err
		}
		if note != "" {
			return nil, status.Errorf(codes.FailedPrecondition,
				"skill %q changed since it was activated: revision %s is no longer available (the current revision is %s); activate the skill again to read its current files",
				sk.name, rev, sk.revision)
		}
		sk = at
	}
	return readResource(ctx, sk, resourcePage{
		rel: req.GetPath(), offset: req.GetOffset(), limit: req.GetLimit(),
		byLines: req.GetLines(), lineOffset: req.GetLineOffset(), lineLimit: int(req.GetLineLimit()),
	}, s.opts.MaxResourceBytes)
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}
