package gateway

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/validate"
)

// The memory API (docs/concepts/memory.md): each call is forwarded to the
// memory service with the caller's tenant, taken from its API key and never
// from the request, so another tenant's episode or entity is NotFound, as
// an unknown one is.

const memoryPeer = "memory"

// Limits of the memory API, the memory service's own (memory.proto).
const (
	MaxMemoryQueryBytes          = 4 << 10
	MaxMemoryTopK                = 100
	MaxMemoryEntityTypes         = 20
	MaxMemoryEntityTypeBytes     = 64
	MaxMemoryContentBytes        = 64 << 10
	MaxMemoryIdempotencyKeyBytes = 128
	MaxMemoryNamePrefixBytes     = 256
	MaxMemoryGraphDepth          = 3
	MaxMemoryGraphNodes          = 500
	MaxMemoryRRFK                = 1000
)

// Memory operations, the op label of baagent_gateway_memory_requests_total.
const (
	memOpSearch         = "search"
	memOpAddEpisode     = "add_episode"
	memOpListEpisodes   = "list_episodes"
	memOpGetEpisode     = "get_episode"
	memOpDeleteEpisode  = "delete_episode"
	memOpListEntities   = "list_entities"
	memOpGetEntity      = "get_entity"
	memOpDeleteEntity   = "delete_entity"
	memOpGraph          = "graph"
	memOpStats          = "stats"
	memOpGetSettings    = "get_settings"
	memOpUpdateSettings = "update_settings"
)

var memoryOps = []string{memOpSearch, memOpAddEpisode, memOpListEpisodes, memOpGetEpisode, memOpDeleteEpisode,
	memOpListEntities, memOpGetEntity, memOpDeleteEntity, memOpGraph, memOpStats, memOpGetSettings, memOpUpdateSettings}

// memoryMetrics count the memory API's calls; every label is a fixed set.
type memoryMetrics struct {
	requests *prometheus.CounterVec // by op, api, code
}

func newMemoryMetrics(reg prometheus.Registerer) (*memoryMetrics, error) {
	m := &memoryMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baagent", Subsystem: "gateway", Name: "memory_requests_total",
		Help: "Memory API calls by op (search, add_episode, …), api (grpc, http) and outcome code (OK, INVALID_ARGUMENT, NOT_FOUND, …).",
	}, []string{"op", "api", "code"})}
	for _, op := range append(memoryOps[:len(memoryOps):len(memoryOps)], patternOps...) {
		for _, api := range []string{apiGRPC, apiHTTP} {
			m.requests.WithLabelValues(op, api, "OK")
		}
	}
	if err := metrics.RegisterExclusive(reg, "gateway memory", m.requests); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *memoryMetrics) observe(op, api string, err error) {
	m.requests.WithLabelValues(op, api, codeName(status.Code(err))).Inc()
}

// memoryReady reports a gateway without a memory connection as Unavailable.
func (s *Server) memoryReady() error {
	if err := s.ready(); err != nil {
		return err
	}
	if s.opts.Memory == nil {
		return missingPeer(memoryPeer)
	}
	return nil
}

// memoryGRPC serves a memory RPC: authenticate and take an in-flight slot,
// validate, forward; the outcome is counted whether or not it got that far.
func memoryGRPC[Req, Resp any](ctx context.Context, s *Server, op, rpc string, req Req, check func(Req) error,
	call func(ctx context.Context, tenant string, req Req) (Resp, error)) (_ Resp, err error) {
	defer func() { s.memoryM.observe(op, apiGRPC, err) }()
	var zero Resp
	tenant, done, err := s.grpcUnary(ctx)
	if err != nil {
		return zero, err
	}
	defer done()
	if err := check(req); err != nil {
		return zero, s.rejected(ctx, rpc, err)
	}
	if err := s.memoryReady(); err != nil {
		return zero, err
	}
	return call(ctx, tenant, req)
}

// memoryHTTP serves a memory route through serveJSON: body (nil: none) is
// read into req's message, then req is validated and forwarded. parseErr is
// an error found reading the query, reported after authentication.
func memoryHTTP[Req proto.Message, Resp proto.Message](s *Server, w http.ResponseWriter, r *http.Request, op string, req Req, hasBody bool, parseErr error,
	check func(Req) error, call func(ctx context.Context, tenant string, req Req) (Resp, error)) {
	var body proto.Message
	if hasBody {
		body = req
	}
	forwardHTTP(s, w, r, op, body, func() (Req, error) { return req, parseErr }, check, call)
}

// refusedCode is the gRPC code of an HTTP status serveJSON answers a
// request it refuses before validation with.
func refusedCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusRequestTimeout:
		return codes.DeadlineExceeded
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Unknown
}

// statusRecorder remembers the status code written, so that a request
// refused before its call (authentication, rate limit, validation) is
// counted with its outcome.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// --- validation ---

func validateSearchMemory(req *baagentv1.GatewayServiceSearchMemoryRequest) error {
	var e validate.Errors
	validate.RequiredText(&e, "query", req.GetQuery(), MaxMemoryQueryBytes)
	validate.Enum(&e, "mode", req.GetMode(), baagentv1.SearchMode_name, true)
	validate.Range(&e, "top_k", req.GetTopK(), 0, MaxMemoryTopK)
	validate.MaxItems(&e, "entity_types", len(req.GetEntityTypes()), MaxMemoryEntityTypes)
	for i, t := range req.GetEntityTypes() {
		if i >= MaxMemoryEntityTypes {
			break
		}
		validate.RequiredText(&e, validate.Index("entity_types", i), t, MaxMemoryEntityTypeBytes)
	}
	for _, w := range []struct {
		field string
		v     *float64
	}{{"vector_weight", req.VectorWeight}, {"keyword_weight", req.KeywordWeight}, {"graph_weight", req.GraphWeight}} {
		if w.v != nil {
			validate.Range(&e, w.field, *w.v, 0, 1)
		}
	}
	if req.RrfK != nil {
		validate.Range(&e, "rrf_k", req.GetRrfK(), 1, MaxMemoryRRFK)
	}
	return e.Err()
}

func validateMemoryIdempotencyKey(e *validate.Errors, field, v string) {
	validate.IdempotencyKey(e, field, v)
	if len(v) > MaxMemoryIdempotencyKeyBytes {
		e.Addf(field, "must be at most %d bytes, got %d", MaxMemoryIdempotencyKeyBytes, len(v))
	}
}

func validateAddMemoryEpisode(req *baagentv1.GatewayServiceAddMemoryEpisodeRequest) error {
	var e validate.Errors
	validate.RequiredText(&e, "content", req.GetContent(), MaxMemoryContentBytes)
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	validate.Optional(&e, "idempotency_key", req.GetIdempotencyKey(), validateMemoryIdempotencyKey)
	return e.Err()
}

func validateListMemoryEpisodes(req *baagentv1.GatewayServiceListMemoryEpisodesRequest) error {
	var e validate.Errors
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	validate.Enum(&e, "status", req.GetStatus(), baagentv1.EpisodeStatus_name, true)
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateMemoryID(field, id string) error {
	var e validate.Errors
	validate.ID(&e, field, id)
	return e.Err()
}

func validateListMemoryEntities(req *baagentv1.GatewayServiceListMemoryEntitiesRequest) error {
	var e validate.Errors
	validate.Text(&e, "type", req.GetType(), MaxMemoryEntityTypeBytes)
	validate.Text(&e, "name_prefix", req.GetNamePrefix(), MaxMemoryNamePrefixBytes)
	validate.PageSize(&e, "page_size", req.GetPageSize(), MaxPageSize)
	validate.Optional(&e, "page_token", req.GetPageToken(), validate.PageToken)
	return e.Err()
}

func validateGetMemoryGraph(req *baagentv1.GatewayServiceGetMemoryGraphRequest) error {
	var e validate.Errors
	validate.ID(&e, "entity_id", req.GetEntityId())
	validate.Range(&e, "depth", req.GetDepth(), 0, MaxMemoryGraphDepth)
	validate.Range(&e, "max_nodes", req.GetMaxNodes(), 0, MaxMemoryGraphNodes)
	return e.Err()
}

func validateGetMemorySettings(req *baagentv1.GatewayServiceGetMemorySettingsRequest) error {
	var e validate.Errors
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	return e.Err()
}

func validateUpdateMemorySettings(req *baagentv1.GatewayServiceUpdateMemorySettingsRequest) error {
	var e validate.Errors
	validate.Optional(&e, "conversation_id", req.GetConversationId(), validate.ID)
	perConversation := req.ConversationCapture != nil || req.ConversationPatterns != nil
	switch {
	case req.ConversationCapture != nil && req.GetConversationId() == "":
		e.Add("conversation_id", "required with conversation_capture")
	case req.ConversationPatterns != nil && req.GetConversationId() == "":
		e.Add("conversation_id", "required with conversation_patterns")
	case !perConversation && req.GetConversationId() != "":
		e.Add("conversation_capture", "required with conversation_id (or conversation_patterns)")
	case req.CaptureRuns == nil && req.ToolsEnabled == nil && req.PatternsEnabled == nil && !perConversation:
		e.Add("capture_runs", "nothing to change: set capture_runs, tools_enabled, patterns_enabled or conversation_id with conversation_capture or conversation_patterns")
	}
	return e.Err()
}

// --- gRPC ---

// SearchMemory recalls entities of the caller's tenant.
func (s *Server) SearchMemory(ctx context.Context, req *baagentv1.GatewayServiceSearchMemoryRequest) (*baagentv1.GatewayServiceSearchMemoryResponse, error) {
	return memoryGRPC(ctx, s, memOpSearch, "SearchMemory", req, validateSearchMemory, s.searchMemory)
}

func (s *Server) searchMemory(ctx context.Context, tenant string, req *baagentv1.GatewayServiceSearchMemoryRequest) (*baagentv1.GatewayServiceSearchMemoryResponse, error) {
	resp, err := s.opts.Memory.Search(ctx, &baagentv1.SearchRequest{
		Tenant: tenant, Query: req.GetQuery(), Mode: req.GetMode(), TopK: req.GetTopK(),
		VectorWeight: req.VectorWeight, KeywordWeight: req.KeywordWeight, GraphWeight: req.GraphWeight,
		RrfK: req.RrfK, EntityTypes: req.GetEntityTypes(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "Search", err)
	}
	return &baagentv1.GatewayServiceSearchMemoryResponse{Hits: resp.GetHits(), EmbeddingModel: resp.GetEmbeddingModel()}, nil
}

// AddMemoryEpisode adds text to the caller's tenant's memory.
func (s *Server) AddMemoryEpisode(ctx context.Context, req *baagentv1.GatewayServiceAddMemoryEpisodeRequest) (*baagentv1.GatewayServiceAddMemoryEpisodeResponse, error) {
	return memoryGRPC(ctx, s, memOpAddEpisode, "AddMemoryEpisode", req, validateAddMemoryEpisode, s.addMemoryEpisode)
}

func (s *Server) addMemoryEpisode(ctx context.Context, tenant string, req *baagentv1.GatewayServiceAddMemoryEpisodeRequest) (*baagentv1.GatewayServiceAddMemoryEpisodeResponse, error) {
	resp, err := s.opts.Memory.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{
		Tenant: tenant, Content: req.GetContent(), Source: baagentv1.EpisodeSource_EPISODE_SOURCE_USER,
		ConversationId: req.GetConversationId(), Wait: req.GetWait(), IdempotencyKey: req.GetIdempotencyKey(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "AddEpisode", err)
	}
	return &baagentv1.GatewayServiceAddMemoryEpisodeResponse{Episode: resp.GetEpisode(), Skipped: resp.GetSkipped()}, nil
}

// ListMemoryEpisodes lists the caller's tenant's episodes.
func (s *Server) ListMemoryEpisodes(ctx context.Context, req *baagentv1.GatewayServiceListMemoryEpisodesRequest) (*baagentv1.GatewayServiceListMemoryEpisodesResponse, error) {
	return memoryGRPC(ctx, s, memOpListEpisodes, "ListMemoryEpisodes", req, validateListMemoryEpisodes, s.listMemoryEpisodes)
}

func (s *Server) listMemoryEpisodes(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListMemoryEpisodesRequest) (*baagentv1.GatewayServiceListMemoryEpisodesResponse, error) {
	resp, err := s.opts.Memory.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{
		Tenant: tenant, ConversationId: req.GetConversationId(), Status: req.GetStatus(), PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "ListEpisodes", err)
	}
	return &baagentv1.GatewayServiceListMemoryEpisodesResponse{Episodes: resp.GetEpisodes(), NextPageToken: resp.GetNextPageToken()}, nil
}

// GetMemoryEpisode reads one of the caller's tenant's episodes.
func (s *Server) GetMemoryEpisode(ctx context.Context, req *baagentv1.GatewayServiceGetMemoryEpisodeRequest) (*baagentv1.GatewayServiceGetMemoryEpisodeResponse, error) {
	return memoryGRPC(ctx, s, memOpGetEpisode, "GetMemoryEpisode", req, checkMemoryID, s.getMemoryEpisode)
}

// checkMemoryID validates the id of an episode or entity.
func checkMemoryID[T interface{ GetId() string }](req T) error {
	return validateMemoryID("id", req.GetId())
}

func (s *Server) getMemoryEpisode(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetMemoryEpisodeRequest) (*baagentv1.GatewayServiceGetMemoryEpisodeResponse, error) {
	resp, err := s.opts.Memory.GetEpisode(ctx, &baagentv1.GetEpisodeRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GetEpisode", err)
	}
	return &baagentv1.GatewayServiceGetMemoryEpisodeResponse{Episode: resp.GetEpisode(), Entities: resp.GetEntities()}, nil
}

// DeleteMemoryEpisode removes one of the caller's tenant's episodes.
func (s *Server) DeleteMemoryEpisode(ctx context.Context, req *baagentv1.GatewayServiceDeleteMemoryEpisodeRequest) (*baagentv1.GatewayServiceDeleteMemoryEpisodeResponse, error) {
	return memoryGRPC(ctx, s, memOpDeleteEpisode, "DeleteMemoryEpisode", req, checkMemoryID, s.deleteMemoryEpisode)
}

func (s *Server) deleteMemoryEpisode(ctx context.Context, tenant string, req *baagentv1.GatewayServiceDeleteMemoryEpisodeRequest) (*baagentv1.GatewayServiceDeleteMemoryEpisodeResponse, error) {
	resp, err := s.opts.Memory.DeleteEpisode(ctx, &baagentv1.DeleteEpisodeRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "DeleteEpisode", err)
	}
	s.log.InfoContext(ctx, "memory episode deleted", "tenant", tenant, "episode_id", req.GetId())
	return &baagentv1.GatewayServiceDeleteMemoryEpisodeResponse{EntitiesRemoved: resp.GetEntitiesRemoved(), RelationsRemoved: resp.GetRelationsRemoved()}, nil
}

// ListMemoryEntities lists the caller's tenant's entities.
func (s *Server) ListMemoryEntities(ctx context.Context, req *baagentv1.GatewayServiceListMemoryEntitiesRequest) (*baagentv1.GatewayServiceListMemoryEntitiesResponse, error) {
	return memoryGRPC(ctx, s, memOpListEntities, "ListMemoryEntities", req, validateListMemoryEntities, s.listMemoryEntities)
}

func (s *Server) listMemoryEntities(ctx context.Context, tenant string, req *baagentv1.GatewayServiceListMemoryEntitiesRequest) (*baagentv1.GatewayServiceListMemoryEntitiesResponse, error) {
	resp, err := s.opts.Memory.ListEntities(ctx, &baagentv1.ListEntitiesRequest{
		Tenant: tenant, Type: req.GetType(), NamePrefix: req.GetNamePrefix(), PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "ListEntities", err)
	}
	return &baagentv1.GatewayServiceListMemoryEntitiesResponse{Entities: resp.GetEntities(), NextPageToken: resp.GetNextPageToken()}, nil
}

// GetMemoryEntity reads one of the caller's tenant's entities.
func (s *Server) GetMemoryEntity(ctx context.Context, req *baagentv1.GatewayServiceGetMemoryEntityRequest) (*baagentv1.GatewayServiceGetMemoryEntityResponse, error) {
	return memoryGRPC(ctx, s, memOpGetEntity, "GetMemoryEntity", req, checkMemoryID, s.getMemoryEntity)
}

func (s *Server) getMemoryEntity(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetMemoryEntityRequest) (*baagentv1.GatewayServiceGetMemoryEntityResponse, error) {
	resp, err := s.opts.Memory.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GetEntity", err)
	}
	return &baagentv1.GatewayServiceGetMemoryEntityResponse{
		Entity: resp.GetEntity(), Relations: resp.GetRelations(), RelatedNames: resp.GetRelatedNames(),
		Community: resp.GetCommunity(), Episodes: resp.GetEpisodes(),
	}, nil
}

// DeleteMemoryEntity removes one of the caller's tenant's entities.
func (s *Server) DeleteMemoryEntity(ctx context.Context, req *baagentv1.GatewayServiceDeleteMemoryEntityRequest) (*baagentv1.GatewayServiceDeleteMemoryEntityResponse, error) {
	return memoryGRPC(ctx, s, memOpDeleteEntity, "DeleteMemoryEntity", req, checkMemoryID, s.deleteMemoryEntity)
}

func (s *Server) deleteMemoryEntity(ctx context.Context, tenant string, req *baagentv1.GatewayServiceDeleteMemoryEntityRequest) (*baagentv1.GatewayServiceDeleteMemoryEntityResponse, error) {
	resp, err := s.opts.Memory.DeleteEntity(ctx, &baagentv1.DeleteEntityRequest{Tenant: tenant, Id: req.GetId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "DeleteEntity", err)
	}
	s.log.InfoContext(ctx, "memory entity deleted", "tenant", tenant, "entity_id", req.GetId())
	return &baagentv1.GatewayServiceDeleteMemoryEntityResponse{RelationsRemoved: resp.GetRelationsRemoved()}, nil
}

// GetMemoryGraph reads the neighbourhood of one of the caller's tenant's
// entities.
func (s *Server) GetMemoryGraph(ctx context.Context, req *baagentv1.GatewayServiceGetMemoryGraphRequest) (*baagentv1.GatewayServiceGetMemoryGraphResponse, error) {
	return memoryGRPC(ctx, s, memOpGraph, "GetMemoryGraph", req, validateGetMemoryGraph, s.getMemoryGraph)
}

func (s *Server) getMemoryGraph(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetMemoryGraphRequest) (*baagentv1.GatewayServiceGetMemoryGraphResponse, error) {
	resp, err := s.opts.Memory.GetGraph(ctx, &baagentv1.GetGraphRequest{Tenant: tenant, EntityId: req.GetEntityId(), Depth: req.GetDepth(), MaxNodes: req.GetMaxNodes()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GetGraph", err)
	}
	return &baagentv1.GatewayServiceGetMemoryGraphResponse{
		Entities: resp.GetEntities(), Relations: resp.GetRelations(), Communities: resp.GetCommunities(), Truncated: resp.GetTruncated(),
	}, nil
}

// GetMemoryStats counts the caller's tenant's memory.
func (s *Server) GetMemoryStats(ctx context.Context, req *baagentv1.GatewayServiceGetMemoryStatsRequest) (*baagentv1.GatewayServiceGetMemoryStatsResponse, error) {
	return memoryGRPC(ctx, s, memOpStats, "GetMemoryStats", req, func(*baagentv1.GatewayServiceGetMemoryStatsRequest) error { return nil }, s.getMemoryStats)
}

func (s *Server) getMemoryStats(ctx context.Context, tenant string, _ *baagentv1.GatewayServiceGetMemoryStatsRequest) (*baagentv1.GatewayServiceGetMemoryStatsResponse, error) {
	resp, err := s.opts.Memory.Stats(ctx, &baagentv1.StatsRequest{Tenant: tenant})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "Stats", err)
	}
	return &baagentv1.GatewayServiceGetMemoryStatsResponse{
		Episodes: resp.GetEpisodes(), EpisodesPending: resp.GetEpisodesPending(), EpisodesFailed: resp.GetEpisodesFailed(),
		Entities: resp.GetEntities(), Relations: resp.GetRelations(), Communities: resp.GetCommunities(),
		Backend: resp.GetBackend(), EmbeddingModel: resp.GetEmbeddingModel(), CommunitiesUpdatedAt: resp.GetCommunitiesUpdatedAt(),
	}, nil
}

// GetMemorySettings reads the caller's tenant's memory switches.
func (s *Server) GetMemorySettings(ctx context.Context, req *baagentv1.GatewayServiceGetMemorySettingsRequest) (*baagentv1.GatewayServiceGetMemorySettingsResponse, error) {
	return memoryGRPC(ctx, s, memOpGetSettings, "GetMemorySettings", req, validateGetMemorySettings, s.getMemorySettings)
}

func (s *Server) getMemorySettings(ctx context.Context, tenant string, req *baagentv1.GatewayServiceGetMemorySettingsRequest) (*baagentv1.GatewayServiceGetMemorySettingsResponse, error) {
	resp, err := s.opts.Memory.GetMemorySettings(ctx, &baagentv1.GetMemorySettingsRequest{Tenant: tenant, ConversationId: req.GetConversationId()})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "GetMemorySettings", err)
	}
	return &baagentv1.GatewayServiceGetMemorySettingsResponse{Settings: resp.GetSettings(), CaptureEffective: resp.GetCaptureEffective(),
		PatternsEffective: resp.GetPatternsEffective()}, nil
}

// UpdateMemorySettings changes the caller's tenant's memory switches.
func (s *Server) UpdateMemorySettings(ctx context.Context, req *baagentv1.GatewayServiceUpdateMemorySettingsRequest) (*baagentv1.GatewayServiceUpdateMemorySettingsResponse, error) {
	return memoryGRPC(ctx, s, memOpUpdateSettings, "UpdateMemorySettings", req, validateUpdateMemorySettings, s.updateMemorySettings)
}

func (s *Server) updateMemorySettings(ctx context.Context, tenant string, req *baagentv1.GatewayServiceUpdateMemorySettingsRequest) (*baagentv1.GatewayServiceUpdateMemorySettingsResponse, error) {
	resp, err := s.opts.Memory.UpdateMemorySettings(ctx, &baagentv1.UpdateMemorySettingsRequest{
		Tenant: tenant, CaptureRuns: req.CaptureRuns, ToolsEnabled: req.ToolsEnabled,
		ConversationId: req.GetConversationId(), ConversationCapture: req.ConversationCapture,
		PatternsEnabled: req.PatternsEnabled, ConversationPatterns: req.ConversationPatterns,
	})
	if err != nil {
		return nil, peerError(ctx, memoryPeer, "UpdateMemorySettings", err)
	}
	s.log.InfoContext(ctx, "memory settings changed", "tenant", tenant, "conversation_id", req.GetConversationId())
	return &baagentv1.GatewayServiceUpdateMemorySettingsResponse{Settings: resp.GetSettings()}, nil
}

// --- HTTP ---

// memoryRoutes adds the HTTP routes of the memory API.
func (s *Server) memoryRoutes(api func(string, http.HandlerFunc)) {
	api("GET /v1/memory/search", s.httpSearchMemory)
	api("POST /v1/memory/episodes", s.httpAddMemoryEpisode)
	api("GET /v1/memory/episodes", s.httpListMemoryEpisodes)
	api("GET /v1/memory/episodes/{id}", s.httpGetMemoryEpisode)
	api("DELETE /v1/memory/episodes/{id}", s.httpDeleteMemoryEpisode)
	api("GET /v1/memory/entities", s.httpListMemoryEntities)
	api("GET /v1/memory/entities/{id}", s.httpGetMemoryEntity)
	api("DELETE /v1/memory/entities/{id}", s.httpDeleteMemoryEntity)
	api("GET /v1/memory/entities/{id}/graph", s.httpGetMemoryGraph)
	api("GET /v1/memory/stats", s.httpGetMemoryStats)
	api("GET /v1/memory/settings", s.httpGetMemorySettings)
	api("PATCH /v1/memory/settings", s.httpUpdateMemorySettings)
}

// queryInt32 reads an optional integer query parameter.
func queryInt32(r *http.Request, name string) (int32, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fieldError(name, "must be an integer")
	}
	return int32(n), nil
}

// queryFloat reads an optional finite number query parameter; absent is nil.
func queryFloat(r *http.Request, name string) (*float64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fieldError(name, "must be a number")
	}
	return &f, nil
}

// parseSearchMode accepts a mode by its short name (hybrid, vector,
// keyword, graph) or its enum name (SEARCH_MODE_HYBRID); empty is
// unspecified (hybrid).
func parseSearchMode(v string) (baagentv1.SearchMode, error) {
	return parseEnum[baagentv1.SearchMode](v, "SEARCH_MODE_", baagentv1.SearchMode_value, "mode", "hybrid, vector, keyword, graph")
}

// parseEpisodeStatus accepts a status by its short name (pending,
// processing, synced, failed) or its enum name; empty is any.
func parseEpisodeStatus(v string) (baagentv1.EpisodeStatus, error) {
	return parseEnum[baagentv1.EpisodeStatus](v, "EPISODE_STATUS_", baagentv1.EpisodeStatus_value, "status", "pending, processing, synced, failed")
}

// parseEnum reads a proto enum value of a query parameter by its short
// name (the enum name without prefix, any case) or its full name; empty
// is the zero value, and the zero value's own name is refused like any
// unknown one, naming field and the allowed short names.
func parseEnum[E ~int32](v, prefix string, values map[string]int32, field, allowed string) (E, error) {
	if v == "" {
		return 0, nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, prefix) {
		name = prefix + name
	}
	if n, ok := values[name]; ok && n != 0 {
		return E(n), nil
	}
	return 0, fieldError(field, "must be one of "+allowed)
}

// parseSearchQuery reads GET /v1/memory/search's query: q (or query), mode,
// top_k, type (repeated, or comma-separated), vector_weight,
// keyword_weight, graph_weight and rrf_k.
func parseSearchQuery(r *http.Request) (*baagentv1.GatewayServiceSearchMemoryRequest, error) {
	q := r.URL.Query()
	req := &baagentv1.GatewayServiceSearchMemoryRequest{Query: q.Get("q")}
	if req.Query == "" {
		req.Query = q.Get("query")
	}
	var err error
	if req.Mode, err = parseSearchMode(q.Get("mode")); err != nil {
		return req, err
	}
	if req.TopK, err = queryInt32(r, "top_k"); err != nil {
		return req, err
	}
	for _, t := range q["type"] {
		for _, part := range strings.Split(t, ",") {
			if part = strings.TrimSpace(part); part != "" {
				req.EntityTypes = append(req.EntityTypes, part)
			}
		}
		if len(req.EntityTypes) > MaxMemoryEntityTypes {
			break
		}
	}
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"vector_weight", &req.VectorWeight}, {"keyword_weight", &req.KeywordWeight}, {"graph_weight", &req.GraphWeight}} {
		if *f.dst, err = queryFloat(r, f.name); err != nil {
			return req, err
		}
	}
	if q.Get("rrf_k") != "" {
		k, err := queryInt32(r, "rrf_k")
		if err != nil {
			return req, err
		}
		req.RrfK = &k
	}
	return req, nil
}

func (s *Server) httpSearchMemory(w http.ResponseWriter, r *http.Request) {
	req, err := parseSearchQuery(r)
	memoryHTTP(s, w, r, memOpSearch, req, false, err, validateSearchMemory, s.searchMemory)
}

func (s *Server) httpAddMemoryEpisode(w http.ResponseWriter, r *http.Request) {
	memoryHTTP(s, w, r, memOpAddEpisode, &baagentv1.GatewayServiceAddMemoryEpisodeRequest{}, true, nil, validateAddMemoryEpisode, s.addMemoryEpisode)
}

func (s *Server) httpListMemoryEpisodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &baagentv1.GatewayServiceListMemoryEpisodesRequest{ConversationId: q.Get("conversation_id"), PageToken: q.Get("page_token")}
	var err error
	req.Status, err = parseEpisodeStatus(q.Get("status"))
	if err == nil {
		req.PageSize, err = queryPageSize(r)
	}
	memoryHTTP(s, w, r, memOpListEpisodes, req, false, err, validateListMemoryEpisodes, s.listMemoryEpisodes)
}

func (s *Server) httpGetMemoryEpisode(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetMemoryEpisodeRequest{Id: r.PathValue("id")}
	memoryHTTP(s, w, r, memOpGetEpisode, req, false, nil, checkMemoryID, s.getMemoryEpisode)
}

func (s *Server) httpDeleteMemoryEpisode(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: r.PathValue("id")}
	memoryHTTP(s, w, r, memOpDeleteEpisode, req, false, nil, checkMemoryID, s.deleteMemoryEpisode)
}

func (s *Server) httpListMemoryEntities(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: q.Get("type"), NamePrefix: q.Get("name_prefix"), PageToken: q.Get("page_token")}
	var err error
	req.PageSize, err = queryPageSize(r)
	memoryHTTP(s, w, r, memOpListEntities, req, false, err, validateListMemoryEntities, s.listMemoryEntities)
}

func (s *Server) httpGetMemoryEntity(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetMemoryEntityRequest{Id: r.PathValue("id")}
	memoryHTTP(s, w, r, memOpGetEntity, req, false, nil, checkMemoryID, s.getMemoryEntity)
}

func (s *Server) httpDeleteMemoryEntity(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceDeleteMemoryEntityRequest{Id: r.PathValue("id")}
	memoryHTTP(s, w, r, memOpDeleteEntity, req, false, nil, checkMemoryID, s.deleteMemoryEntity)
}

func (s *Server) httpGetMemoryGraph(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: r.PathValue("id")}
	var err error
	if req.Depth, err = queryInt32(r, "depth"); err == nil {
		req.MaxNodes, err = queryInt32(r, "max_nodes")
	}
	memoryHTTP(s, w, r, memOpGraph, req, false, err, validateGetMemoryGraph, s.getMemoryGraph)
}

func (s *Server) httpGetMemoryStats(w http.ResponseWriter, r *http.Request) {
	memoryHTTP(s, w, r, memOpStats, &baagentv1.GatewayServiceGetMemoryStatsRequest{}, false, nil,
		func(*baagentv1.GatewayServiceGetMemoryStatsRequest) error { return nil }, s.getMemoryStats)
}

func (s *Server) httpGetMemorySettings(w http.ResponseWriter, r *http.Request) {
	req := &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: r.URL.Query().Get("conversation_id")}
	memoryHTTP(s, w, r, memOpGetSettings, req, false, nil, validateGetMemorySettings, s.getMemorySettings)
}

func (s *Server) httpUpdateMemorySettings(w http.ResponseWriter, r *http.Request) {
	memoryHTTP(s, w, r, memOpUpdateSettings, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{}, true, nil, validateUpdateMemorySettings, s.updateMemorySettings)
}
