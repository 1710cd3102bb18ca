// Package toolrunner is the ToolRunnerService: it executes tool calls with
// the protocol of docs/concepts/tools.md:
// permissions, idempotency and caching, timeouts and retries,
// output levels, artifacts and truncation, over the built-in tools and any
// tool.Source (ToolProvider servers, MCP servers).
package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/artifact"
	"github.com/baagent/baagent/services/toolrunner/builtin"
	"github.com/baagent/baagent/services/toolrunner/idempotency"
	"github.com/baagent/baagent/services/toolrunner/quota"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// ServiceName is the fully qualified gRPC service name, equal to
// baagentv1.ToolRunnerService_ServiceDesc.ServiceName.
const ServiceName = "baagent.v1.ToolRunnerService"

// Defaults of [Options].
const (
	DefaultCleanupInterval = 10 * time.Minute
	// readArtifactMaxBytes bounds one ReadArtifact page (the RPC, not the
	// tool, whose observation is bounded at 50 KiB).
	readArtifactMaxBytes = 4 << 20
)

// Options configures a [Server]. Zero limits take the defaults.
type Options struct {
	// Logger receives the service's logs; nil uses slog.Default().
	Logger *slog.Logger
	// Registerer receives the collectors (baagent_toolrunner_*); nil
	// registers nothing.
	Registerer prometheus.Registerer
	// WorkspaceDir holds the per-conversation workspaces
	// (<dir>/<tenant>/<conversation>); required.
	WorkspaceDir string
	// WorkspaceSeedDir is copied into every new workspace; empty seeds
	// nothing; a directory that does not exist fails New.
	WorkspaceSeedDir string
	// ArtifactDir is the artifact store's root; required.
	ArtifactDir string
	// ConfigFile is the tools file (-tools-file); its `policies:` section
	// configures the tools. Empty: the built-in defaults.
	ConfigFile string
	// Clock drives cache TTLs, artifact ages and retry delays; nil is the
	// system clock.
	Clock Clock
	// Sources offer tools besides the built-in ones (ToolProvider and MCP
	// managers); their tools may come and go while the service runs.
	Sources []tool.Source
	// Memory, when set, offers the memory tools (memory_search,
	// memory_add) to the tenants whose memory settings enable them; nil:
	// no memory tools.
	Memory baagentv1.MemoryServiceClient
	// ServerStatus, when set, reports the configured MCP servers' state
	// for a tenant in ListTools (up, needs_auth).
	ServerStatus func(ctx context.Context, tenant string) []*baagentv1.ExternalServerStatus

	// ArtifactMaxAge removes older artifacts (default 24 h).
	ArtifactMaxAge time.Duration
	// ArtifactMaxBytes bounds the artifact store (default 10 GiB); above
	// it artifacts are removed from the tenants holding the most first.
	ArtifactMaxBytes int64
	// ArtifactQuotaBytes bounds each tenant's artifacts (default 2 GiB;
	// negative: no quota): a tenant's new artifact first removes that
	// tenant's least recently used ones, never another tenant's; a result
	// that cannot fit is returned without an artifact, its observation
	// saying so.
	ArtifactQuotaBytes int64
	// WorkspaceQuotaBytes bounds the disk space of each tenant's
	// workspaces, all its conversations and their seed copies together
	// (default 1 GiB; negative: no quota). A file write or a new workspace
	// that would pass it fails with QUOTA_EXCEEDED.
	WorkspaceQuotaBytes int64
	// CleanupInterval is how often Run cleans up (default 10 min).
	CleanupInterval time.Duration
	// CacheEntries and CacheBytes bound the idempotency cache (default
	// 10000 entries, 64 MiB).
	CacheEntries int
	CacheBytes   int
	// LargeDataBytes is the size above which results always become
	// artifacts (default 1 MiB).
	LargeDataBytes int
	// QueryTimeout bounds one sql_query (default 30 s).
	QueryTimeout time.Duration
	// Builtin holds the budgets of the built-in tools (see
	// builtin.Options); its Artifacts and QueryTimeout are set by New.
	Builtin builtin.Options
	// WorkspaceMaxIdle removes a conversation's workspace after it has not
	// been used for this long (default 7 days); a later call starts afresh.
	WorkspaceMaxIdle time.Duration

	// Records holds the idempotency records of calls with side effects.
	// The service passes the JetStream KV store shared by every replica;
	// nil keeps them in this process (idempotency.Memory), which holds
	// within one process only.
	Records idempotency.Store
	// Heartbeat and Lease tune how a retry tells a call still running
	// from one whose toolrunner died (defaults 1 s and 5 s).
	Heartbeat time.Duration
	Lease     time.Duration
	// DrainTimeout is how long shutdown lets calls that outlived their
	// callers finish before cancelling them (default 10 s); a call cut
	// short is recorded with an unknown outcome.
	DrainTimeout time.Duration
}

// Server implements baagentv1.ToolRunnerServiceServer.
type Server struct {
	baagentv1.UnimplementedToolRunnerServiceServer

	log            *slog.Logger
	clock          Clock
	policies       *Policies
	tools          *registry
	serverStatus   func(ctx context.Context, tenant string) []*baagentv1.ExternalServerStatus
	workspaces     *workspaces
	artifacts      *artifact.Store
	cache          *resultCache
	metrics        *metrics
	hooks          *hookSet
	largeDataBytes int
	cleanupEvery   time.Duration
	wsMaxIdle      time.Duration

	// compositions are the tools file's compositions, by name.
	compositions compositions

	ledger *ledger
	// Calls with side effects run detached from their callers until they
	// end; life bounds them (cancelled at shutdown after drainTimeout).
	detached     sync.WaitGroup
	life         context.Context
	endLife      context.CancelFunc
	drainTimeout time.Duration
	drainOnce    sync.Once
}

var _ baagentv1.ToolRunnerServiceServer = (*Server)(nil)

// New returns a Server configured by opts: it opens the workspace and
// artifact directories, loads the artifact metadata and the tools file's
// policies, and registers the metrics.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.CleanupInterval <= 0 {
		opts.CleanupInterval = DefaultCleanupInterval
	}
	if opts.CacheEntries <= 0 {
		opts.CacheEntries = DefaultCacheEntries
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.LargeDataBytes <= 0 {
		opts.LargeDataBytes = DefaultLargeDataBytes
	}
	if opts.WorkspaceMaxIdle <= 0 {
		opts.WorkspaceMaxIdle = DefaultWorkspaceMaxIdle
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Lease < 2*opts.Heartbeat {
		return nil, fmt.Errorf("idempotency lease %s must be at least twice the heartbeat %s", opts.Lease, opts.Heartbeat)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Records == nil {
		opts.Records = idempotency.NewMemory(nil, time.Hour, DefaultCacheEntries)
	}
	s := &Server{
		log: opts.Logger.With("service", ServiceName), clock: opts.Clock,
		largeDataBytes: opts.LargeDataBytes, cleanupEvery: opts.CleanupInterval, wsMaxIdle: opts.WorkspaceMaxIdle,
		policies:     &Policies{Tools: map[string]ToolPolicy{}},
		drainTimeout: opts.DrainTimeout,
		serverStatus: opts.ServerStatus,
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.ledger = &ledger{store: opts.Records, replica: newReplicaID(), heartbeat: opts.Heartbeat, lease: opts.Lease, log: s.log}
	if opts.ConfigFile != "" {
		ps, err := LoadPolicies(opts.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("setting tools-file: %w", err)
		}
		s.policies = &ps
		cs, err := LoadCompositions(opts.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("setting tools-file: %w", err)
		}
		s.compositions = compositions{}
		for i := range cs {
			s.compositions[cs[i].Name] = &cs[i]
		}
	}
	var err error
	if s.metrics, err = newMetrics(opts.Registerer, func() (int, int64) {
		if s.artifacts == nil {
			return 0, 0
		}
		return s.artifacts.Stats()
	}, func() int64 {
		if s.workspaces == nil {
			return 0
		}
		return s.workspaces.quota.usage()
	}); err != nil {
		return nil, err
	}
	if opts.ArtifactDir == "" {
		return nil, errors.New("setting artifact-dir: required")
	}
	s.artifacts, err = artifact.Open(artifact.Options{
		Dir: opts.ArtifactDir, MaxAge: opts.ArtifactMaxAge, MaxBytes: opts.ArtifactMaxBytes,
		Now: opts.Clock.Now, Logger: s.log, OnRemove: func(n int64) { s.metrics.artifactsGone.Add(float64(n)) },
		TenantMaxBytes:  opts.ArtifactQuotaBytes, // the store reads 0 and negative values as this does
		OnQuotaExceeded: func() { s.metrics.quotaExceeded.WithLabelValues(quota.Artifact).Inc() },
	})
	if err != nil {
		return nil, fmt.Errorf("setting artifact-dir: %w", err)
	}
	if s.workspaces, err = openWorkspaces(workspaceOptions{
		Dir: opts.WorkspaceDir, Seed: opts.WorkspaceSeedDir, Now: opts.Clock.Now, Logger: s.log,
		Quota:      quota.Limit(opts.WorkspaceQuotaBytes, DefaultWorkspaceQuotaBytes),
		OnExceeded: func() { s.metrics.quotaExceeded.WithLabelValues(quota.Workspace).Inc() },
	}); err != nil {
		s.artifacts.Close()
		return nil, err
	}
	bo := opts.Builtin
	bo.Artifacts, bo.QueryTimeout = s.artifacts, opts.QueryTimeout
	builtins := builtin.Tools(bo)
	sources := opts.Sources
	if opts.Memory != nil {
		sources = append([]tool.Source{builtin.NewMemorySource(builtin.MemoryOptions{Client: opts.Memory, Logger: s.log})}, sources...)
	}
	if s.tools, err = newRegistry(s.log, builtins, sources); err != nil {
		s.Close()
		return nil, err
	}
	for name := range s.compositions {
		if _, ok := s.tools.builtins[name]; ok {
			s.Close()
			return nil, fmt.Errorf("setting tools-file: composition %s: the name is a built-in tool's", name)
		}
	}
	s.cache = newResultCache(opts.Clock.Now, opts.CacheEntries, opts.CacheBytes)
	var hookCfgs []HookConfig
	if opts.ConfigFile != "" {
		if hookCfgs, err = LoadHooks(opts.ConfigFile); err != nil {
			s.Close()
			return nil, fmt.Errorf("setting tools-file: %w", err)
		}
	}
	if s.hooks, err = newHookSet(hookCfgs, s.log, s.metrics); err != nil {
		s.Close()
		return nil, fmt.Errorf("setting tools-file: %w", err)
	}
	return s, nil
}

// Close waits for detached calls (see Run), then releases the
// directories. Call it after the gRPC server stopped.
func (s *Server) Close() error {
	s.drain()
	var errs []error
	if s.artifacts != nil {
		errs = append(errs, s.artifacts.Close())
	}
	if s.workspaces != nil {
		errs = append(errs, s.workspaces.close())
	}
	if s.hooks != nil {
		errs = append(errs, s.hooks.close())
	}
	return errors.Join(errs...)
}

// Run cleans up artifacts (by age and size), the cache's expired entries
// and idle workspaces every CleanupInterval until ctx is done. Then it
// drains: calls with side effects that outlived their callers get
// DrainTimeout to finish and record their outcomes while the process's
// NATS connection is still open.
func (s *Server) Run(ctx context.Context) error {
	t := time.NewTicker(s.cleanupEvery)
	defer t.Stop()
	for {
		s.artifacts.Cleanup()
		s.cache.sweep()
		if n, freed := s.workspaces.removeIdle(s.wsMaxIdle); n > 0 {
			s.log.Info("removed idle workspaces", "count", n, "bytes", freed, "max_idle", s.wsMaxIdle.String())
		}
		select {
		case <-ctx.Done():
			s.drain()
			return nil
		case <-t.C:
		}
	}
}

// drain waits up to drainTimeout for detached calls, then cancels them
// and waits for their (unknown) outcomes to be recorded.
func (s *Server) drain() {
	s.drainOnce.Do(func() {
		idle := make(chan struct{})
		go func() {
			s.detached.Wait()
			close(idle)
		}()
		t := time.NewTimer(s.drainTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			s.log.Warn("calls still running at shutdown are cancelled", "drain_timeout", s.drainTimeout.String())
		}
		s.endLife()
		<-idle
	})
}

// Register registers the ToolRunnerService on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	baagentv1.RegisterToolRunnerServiceServer(gs, s)
}

// Invoke executes one tool call. Tool failures are results (success=false
// with the standard error observation); an RPC error means a bad request or a
// caller that went away.
func (s *Server) Invoke(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	if err := validateInvoke(req); err != nil {
		return nil, s.rejected(ctx, "Invoke", err)
	}
	res, err := s.invoke(ctx, req.GetRequest())
	if err != nil {
		return nil, err
	}
	return &baagentv1.InvokeResponse{Result: res}, nil
}

// ListTools lists the tools a caller may use: those the allow list admits
// and the operator does not deny, sorted by name.
func (s *Server) ListTools(ctx context.Context, req *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	if err := validateListTools(req); err != nil {
		return nil, s.rejected(ctx, "ListTools", err)
	}
	resp := &baagentv1.ListToolsResponse{}
	var specs []tool.Spec
	for _, t := range s.tools.allFor(ctx, req.GetTenant()) {
		if _, ok := s.compositions[t.Spec().Name]; !ok { // a composition shadows a source's tool
			specs = append(specs, t.Spec())
		}
	}
	for _, c := range s.compositions {
		specs = append(specs, c.spec(s.compositionReadOnly(c)))
	}
	slices.SortFunc(specs, func(a, b tool.Spec) int { return strings.Compare(a.Name, b.Name) })
	for _, spec := range specs {
		pol := s.policies.resolve(spec)
		if !allowedBy(req.GetAllowedTools(), spec.Name) || pol.permission == baagentv1.ToolPermission_TOOL_PERMISSION_DENY {
			continue
		}
		resp.Tools = append(resp.Tools, &baagentv1.ToolDefinition{
			Schema:             &baagentv1.ToolSchema{Name: spec.Name, Description: spec.Description, Parameters: s.schemaStruct(spec)},
			Version:            spec.Version,
			DefaultOutputLevel: pol.toolLevel,
			CachePolicy:        pol.cache,
			RetryPolicy:        pol.retry.proto(),
			DefaultTimeoutMs:   pol.timeout.Milliseconds(),
			Permission:         pol.permission,
			Source:             spec.Source,
			ReadOnly:           spec.ReadOnly,
		})
	}
	if s.serverStatus != nil {
		resp.Servers = s.serverStatus(ctx, req.GetTenant())
	}
	return resp, nil
}

// schemaStruct converts a tool's JSON Schema for the wire.
func (s *Server) schemaStruct(spec tool.Spec) *structpb.Struct {
	if len(spec.Parameters) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(spec.Parameters, &m); err != nil {
		s.log.Warn("tool schema is not a JSON object", "tool", spec.Name, "error", err)
		return nil
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		s.log.Warn("tool schema not representable", "tool", spec.Name, "error", err)
		return nil
	}
	return st
}

// ReadArtifact reads a page of an artifact's lines.
func (s *Server) ReadArtifact(ctx context.Context, req *baagentv1.ReadArtifactRequest) (*baagentv1.ReadArtifactResponse, error) {
	if err := validateReadArtifact(req); err != nil {
		return nil, s.rejected(ctx, "ReadArtifact", err)
	}
	r := artifact.ReadRequest{
		Owner: artifact.Owner{Tenant: req.GetTenant(), ConversationID: req.GetConversationId()},
		ID:    req.GetArtifactId(), Offset: req.GetOffset(), Limit: int(req.GetLimit()), MaxBytes: readArtifactMaxBytes,
	}
	if p := req.GetPattern(); p != "" {
		re, err := regexp.Compile(p)
		if err != nil { // validated already; kept for safety
			return nil, status.Errorf(codes.InvalidArgument, "pattern: %v", err)
		}
		r.Pattern = re
	}
	page, err := s.artifacts.Read(r)
	if errors.Is(err, artifact.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "%s not found in conversation %s (it may have expired)", req.GetArtifactId(), req.GetConversationId())
	}
	if err != nil {
		s.log.ErrorContext(ctx, "artifact read failed", "artifact_id", req.GetArtifactId(), "error", err)
		return nil, status.Errorf(codes.Internal, "reading %s failed", req.GetArtifactId())
	}
	lines := make([]string, len(page.Lines))
	for i, l := range page.Lines {
		lines[i] = l.Text
	}
	return &baagentv1.ReadArtifactResponse{
		Content: strings.Join(lines, "\n"), TotalLines: page.TotalLines, NextOffset: page.NextOffset, SizeBytes: page.Size,
	}, nil
}

// ReleaseConversation deletes a conversation's artifacts, workspace and
// cached results.
func (s *Server) ReleaseConversation(ctx context.Context, req *baagentv1.ReleaseConversationRequest) (*baagentv1.ReleaseConversationResponse, error) {
	if err := validateReleaseConversation(req); err != nil {
		return nil, s.rejected(ctx, "ReleaseConversation", err)
	}
	owner := artifact.Owner{Tenant: req.GetTenant(), ConversationID: req.GetConversationId()}
	n, freed := s.artifacts.DeleteConversation(owner)
	s.cache.dropOwner(owner)
	wsBytes, err := s.workspaces.remove(req.GetTenant(), req.GetConversationId())
	if err != nil {
		s.log.ErrorContext(ctx, "workspace not removed", "tenant", req.GetTenant(), "conversation_id", req.GetConversationId(), "error", scrubPath(err))
		return nil, status.Errorf(codes.Internal, "the workspace of conversation %s could not be removed", req.GetConversationId())
	}
	if p, ok := s.ledger.store.(idempotency.ConversationPurger); ok {
		if _, err := p.PurgeConversation(ctx, req.GetTenant(), req.GetConversationId()); err != nil {
			s.log.ErrorContext(ctx, "idempotency records not removed", "tenant", req.GetTenant(), "conversation_id", req.GetConversationId(), "error", err)
			return nil, status.Errorf(codes.Unavailable, "the idempotency records of conversation %s could not be removed; retry", req.GetConversationId())
		}
	}
	s.log.InfoContext(ctx, "conversation released", "tenant", req.GetTenant(), "conversation_id", req.GetConversationId(), "artifacts", n, "bytes", freed+wsBytes)
	return &baagentv1.ReleaseConversationResponse{ArtifactsDeleted: int32(n), BytesFreed: freed + wsBytes}, nil
}

// rejected logs a refused request at debug level and returns its error.
func (s *Server) rejected(ctx context.Context, rpc string, err error) error {
	s.log.DebugContext(ctx, "request rejected", "rpc", rpc, "error", err)
	return err
}

// scrubPath drops the path of a *fs.PathError: host paths stay out of logs.
func scrubPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
