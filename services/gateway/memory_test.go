package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// recordingMemory is a MemoryService that records every request it is
// sent and answers with a fixed, recognisable response; fail, when set,
// is its answer instead.
type recordingMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
	mu   sync.Mutex
	reqs []proto.Message
	fail error
}

func (m *recordingMemory) record(req proto.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, proto.Clone(req))
	return m.fail
}

func (m *recordingMemory) last(t *testing.T) proto.Message {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		t.Fatal("the memory service received no request")
	}
	return m.reqs[len(m.reqs)-1]
}

func (m *recordingMemory) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

func (m *recordingMemory) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

var testEntity = &baagentv1.Entity{Id: "en_01", Name: "North region", Type: "Region"}

func (m *recordingMemory) Search(_ context.Context, req *baagentv1.SearchRequest) (*baagentv1.SearchResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.SearchResponse{Hits: []*baagentv1.SearchHit{{Entity: testEntity, Score: 0.5}}, EmbeddingModel: "lexical-hash-v1"}, nil
}

func (m *recordingMemory) AddEpisode(_ context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.AddEpisodeResponse{Episode: &baagentv1.Episode{Id: "ep_01", Tenant: req.GetTenant(), Content: req.GetContent()}}, nil
}

func (m *recordingMemory) ListEpisodes(_ context.Context, req *baagentv1.ListEpisodesRequest) (*baagentv1.ListEpisodesResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.ListEpisodesResponse{Episodes: []*baagentv1.Episode{{Id: "ep_01"}}, NextPageToken: "next"}, nil
}

func (m *recordingMemory) GetEpisode(_ context.Context, req *baagentv1.GetEpisodeRequest) (*baagentv1.GetEpisodeResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GetEpisodeResponse{Episode: &baagentv1.Episode{Id: req.GetId()}, Entities: []*baagentv1.Entity{testEntity}}, nil
}

func (m *recordingMemory) DeleteEpisode(_ context.Context, req *baagentv1.DeleteEpisodeRequest) (*baagentv1.DeleteEpisodeResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.DeleteEpisodeResponse{EntitiesRemoved: 2, RelationsRemoved: 3}, nil
}

func (m *recordingMemory) ListEntities(_ context.Context, req *baagentv1.ListEntitiesRequest) (*baagentv1.ListEntitiesResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.ListEntitiesResponse{Entities: []*baagentv1.Entity{testEntity}}, nil
}

func (m *recordingMemory) GetEntity(_ context.Context, req *baagentv1.GetEntityRequest) (*baagentv1.GetEntityResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GetEntityResponse{Entity: testEntity, RelatedNames: map[string]string{"en_02": "Q3 revenue"}}, nil
}

func (m *recordingMemory) DeleteEntity(_ context.Context, req *baagentv1.DeleteEntityRequest) (*baagentv1.DeleteEntityResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.DeleteEntityResponse{RelationsRemoved: 4}, nil
}

func (m *recordingMemory) GetGraph(_ context.Context, req *baagentv1.GetGraphRequest) (*baagentv1.GetGraphResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GetGraphResponse{Entities: []*baagentv1.Entity{testEntity}, Truncated: true}, nil
}

func (m *recordingMemory) Stats(_ context.Context, req *baagentv1.StatsRequest) (*baagentv1.StatsResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.StatsResponse{Episodes: 7, Entities: 5, Backend: "sqlite", EmbeddingModel: "lexical-hash-v1"}, nil
}

func (m *recordingMemory) GetMemorySettings(_ context.Context, req *baagentv1.GetMemorySettingsRequest) (*baagentv1.GetMemorySettingsResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.GetMemorySettingsResponse{Settings: &baagentv1.MemorySettings{CaptureRuns: true, ToolsEnabled: true}, CaptureEffective: true}, nil
}

func (m *recordingMemory) UpdateMemorySettings(_ context.Context, req *baagentv1.UpdateMemorySettingsRequest) (*baagentv1.UpdateMemorySettingsResponse, error) {
	if err := m.record(req); err != nil {
		return nil, err
	}
	return &baagentv1.UpdateMemorySettingsResponse{Settings: &baagentv1.MemorySettings{CaptureRuns: req.GetCaptureRuns()}}, nil
}

// newMemoryEnv is a gateway whose memory peer is mem, on loopback.
func newMemoryEnv(t *testing.T, mem baagentv1.MemoryServiceServer) *env {
	t.Helper()
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) {
		if mem != nil {
			baagentv1.RegisterMemoryServiceServer(gs, mem)
		}
	})
	return newEnv(t, Options{Memory: baagentv1.NewMemoryServiceClient(conn)})
}

// TestMemoryGRPCForwardsWithTheKeysTenant calls every memory RPC and
// checks the memory service was asked with the API key's tenant and the
// request's fields, and that its answer came back whole.
func TestMemoryGRPCForwardsWithTheKeysTenant(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	ctx := withKey(testCtx(t), keyAcme)
	c := e.client

	cases := []struct {
		name string
		call func() (proto.Message, error)
		want proto.Message // what the memory service must receive
	}{
		{"SearchMemory", func() (proto.Message, error) {
			return c.SearchMemory(ctx, &baagentv1.GatewayServiceSearchMemoryRequest{Query: "north revenue", Mode: baagentv1.SearchMode_SEARCH_MODE_KEYWORD, TopK: 5,
				EntityTypes: []string{"Region"}, VectorWeight: ptr(0.5), RrfK: ptr[int32](30)})
		}, &baagentv1.SearchRequest{Tenant: "acme", Query: "north revenue", Mode: baagentv1.SearchMode_SEARCH_MODE_KEYWORD, TopK: 5,
			EntityTypes: []string{"Region"}, VectorWeight: ptr(0.5), RrfK: ptr[int32](30)}},
		{"AddMemoryEpisode", func() (proto.Message, error) {
			return c.AddMemoryEpisode(ctx, &baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: "North grew 12%", ConversationId: "conv-1", Wait: true, IdempotencyKey: "k1"})
		}, &baagentv1.AddEpisodeRequest{Tenant: "acme", Content: "North grew 12%", Source: baagentv1.EpisodeSource_EPISODE_SOURCE_USER, ConversationId: "conv-1", Wait: true, IdempotencyKey: "k1"}},
		{"ListMemoryEpisodes", func() (proto.Message, error) {
			return c.ListMemoryEpisodes(ctx, &baagentv1.GatewayServiceListMemoryEpisodesRequest{ConversationId: "conv-1", Status: baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED, PageSize: 20, PageToken: "p"})
		}, &baagentv1.ListEpisodesRequest{Tenant: "acme", ConversationId: "conv-1", Status: baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED, PageSize: 20, PageToken: "p"}},
		{"GetMemoryEpisode", func() (proto.Message, error) {
			return c.GetMemoryEpisode(ctx, &baagentv1.GatewayServiceGetMemoryEpisodeRequest{Id: "ep_01"})
		}, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: "ep_01"}},
		{"DeleteMemoryEpisode", func() (proto.Message, error) {
			return c.DeleteMemoryEpisode(ctx, &baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: "ep_01"})
		}, &baagentv1.DeleteEpisodeRequest{Tenant: "acme", Id: "ep_01"}},
		{"ListMemoryEntities", func() (proto.Message, error) {
			return c.ListMemoryEntities(ctx, &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: "Region", NamePrefix: "nor", PageSize: 10})
		}, &baagentv1.ListEntitiesRequest{Tenant: "acme", Type: "Region", NamePrefix: "nor", PageSize: 10}},
		{"GetMemoryEntity", func() (proto.Message, error) {
			return c.GetMemoryEntity(ctx, &baagentv1.GatewayServiceGetMemoryEntityRequest{Id: "en_01"})
		}, &baagentv1.GetEntityRequest{Tenant: "acme", Id: "en_01"}},
		{"DeleteMemoryEntity", func() (proto.Message, error) {
			return c.DeleteMemoryEntity(ctx, &baagentv1.GatewayServiceDeleteMemoryEntityRequest{Id: "en_01"})
		}, &baagentv1.DeleteEntityRequest{Tenant: "acme", Id: "en_01"}},
		{"GetMemoryGraph", func() (proto.Message, error) {
			return c.GetMemoryGraph(ctx, &baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: "en_01", Depth: 2, MaxNodes: 30})
		}, &baagentv1.GetGraphRequest{Tenant: "acme", EntityId: "en_01", Depth: 2, MaxNodes: 30}},
		{"GetMemoryStats", func() (proto.Message, error) {
			return c.GetMemoryStats(ctx, &baagentv1.GatewayServiceGetMemoryStatsRequest{})
		}, &baagentv1.StatsRequest{Tenant: "acme"}},
		{"GetMemorySettings", func() (proto.Message, error) {
			return c.GetMemorySettings(ctx, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: "conv-1"})
		}, &baagentv1.GetMemorySettingsRequest{Tenant: "acme", ConversationId: "conv-1"}},
		{"UpdateMemorySettings", func() (proto.Message, error) {
			return c.UpdateMemorySettings(ctx, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{CaptureRuns: ptr(false), ConversationId: "conv-1", ConversationCapture: ptr(false)})
		}, &baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", CaptureRuns: ptr(false), ConversationId: "conv-1", ConversationCapture: ptr(false)}},
	}
	for _, tc := range cases {
		resp, err := tc.call()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := mem.last(t); !proto.Equal(got, tc.want) {
			t.Errorf("%s: memory received %v, want %v", tc.name, got, tc.want)
		}
		if resp == nil {
			t.Errorf("%s: no response", tc.name)
		}
	}
	if got := mem.count(); got != len(cases) {
		t.Errorf("memory received %d requests, want %d", got, len(cases))
	}
	// The answers come back whole.
	sr, _ := c.SearchMemory(ctx, &baagentv1.GatewayServiceSearchMemoryRequest{Query: "north"})
	if len(sr.GetHits()) != 1 || sr.GetHits()[0].GetEntity().GetName() != "North region" || sr.GetEmbeddingModel() != "lexical-hash-v1" {
		t.Errorf("SearchMemory answer: %v", sr)
	}
	st, _ := c.GetMemoryStats(ctx, &baagentv1.GatewayServiceGetMemoryStatsRequest{})
	if st.GetEpisodes() != 7 || st.GetEntities() != 5 || st.GetBackend() != "sqlite" {
		t.Errorf("GetMemoryStats answer: %v", st)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(memOpSearch, apiGRPC, "OK")); got != 2 {
		t.Errorf("memory_requests_total{op=search,api=grpc,code=OK} = %v, want 2", got)
	}
}

// TestMemoryHTTPRoutes serves every memory route as another tenant and
// checks what reached the memory service and what came back.
func TestMemoryHTTPRoutes(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)

	cases := []struct {
		method, path, body string
		want               proto.Message
		field              string // a top-level field of the answer
	}{
		{"GET", "/v1/memory/search?q=north+revenue&mode=vector&top_k=3&type=Region,Metric&graph_weight=0.2&rrf_k=10", "",
			&baagentv1.SearchRequest{Tenant: "initech", Query: "north revenue", Mode: baagentv1.SearchMode_SEARCH_MODE_VECTOR, TopK: 3,
				EntityTypes: []string{"Region", "Metric"}, GraphWeight: ptr(0.2), RrfK: ptr[int32](10)}, "hits"},
		{"POST", "/v1/memory/episodes", `{"content":"North grew 12%","conversation_id":"c1","tenant":"acme"}`, nil, ""},
		{"POST", "/v1/memory/episodes", `{"content":"North grew 12%","conversation_id":"c1","wait":true}`,
			&baagentv1.AddEpisodeRequest{Tenant: "initech", Content: "North grew 12%", Source: baagentv1.EpisodeSource_EPISODE_SOURCE_USER, ConversationId: "c1", Wait: true}, "episode"},
		{"GET", "/v1/memory/episodes?status=synced&page_size=5&conversation_id=c1&page_token=t", "",
			&baagentv1.ListEpisodesRequest{Tenant: "initech", Status: baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED, PageSize: 5, ConversationId: "c1", PageToken: "t"}, "next_page_token"},
		{"GET", "/v1/memory/episodes/ep_01", "", &baagentv1.GetEpisodeRequest{Tenant: "initech", Id: "ep_01"}, "entities"},
		{"DELETE", "/v1/memory/episodes/ep_01", "", &baagentv1.DeleteEpisodeRequest{Tenant: "initech", Id: "ep_01"}, "relations_removed"},
		{"GET", "/v1/memory/entities?type=Region&name_prefix=No", "", &baagentv1.ListEntitiesRequest{Tenant: "initech", Type: "Region", NamePrefix: "No"}, "entities"},
		{"GET", "/v1/memory/entities/en_01", "", &baagentv1.GetEntityRequest{Tenant: "initech", Id: "en_01"}, "related_names"},
		{"DELETE", "/v1/memory/entities/en_01", "", &baagentv1.DeleteEntityRequest{Tenant: "initech", Id: "en_01"}, "relations_removed"},
		{"GET", "/v1/memory/entities/en_01/graph?depth=2&max_nodes=40", "", &baagentv1.GetGraphRequest{Tenant: "initech", EntityId: "en_01", Depth: 2, MaxNodes: 40}, "truncated"},
		{"GET", "/v1/memory/stats", "", &baagentv1.StatsRequest{Tenant: "initech"}, "embedding_model"},
		{"GET", "/v1/memory/settings?conversation_id=c1", "", &baagentv1.GetMemorySettingsRequest{Tenant: "initech", ConversationId: "c1"}, "capture_effective"},
		{"PATCH", "/v1/memory/settings", `{"tools_enabled":false}`, &baagentv1.UpdateMemorySettingsRequest{Tenant: "initech", ToolsEnabled: ptr(false)}, "settings"},
	}
	for _, tc := range cases {
		before := mem.count()
		r := e.do(t, keyInitech, tc.method, tc.path, "application/json", []byte(tc.body))
		if tc.want == nil {
			// A body naming a tenant is refused: the tenant is the key's.
			if r.code != http.StatusBadRequest || mem.count() != before {
				t.Errorf("%s %s: %d %s, want 400 and no call", tc.method, tc.path, r.code, r.raw)
			}
			continue
		}
		if r.code != http.StatusOK {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, r.code, r.raw)
			continue
		}
		if got := mem.last(t); !proto.Equal(got, tc.want) {
			t.Errorf("%s %s: memory received %v, want %v", tc.method, tc.path, got, tc.want)
		}
		if _, ok := r.body[tc.field]; !ok {
			t.Errorf("%s %s: answer has no %q: %s", tc.method, tc.path, tc.field, r.raw)
		}
	}
	if r := e.do(t, "", "GET", "/v1/memory/stats", "", nil); r.code != http.StatusUnauthorized {
		t.Errorf("no key: %d %s", r.code, r.raw)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(memOpStats, apiHTTP, "UNAUTHENTICATED")); got != 1 {
		t.Errorf("memory_requests_total{op=stats,api=http,code=UNAUTHENTICATED} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(memOpAddEpisode, apiHTTP, "INVALID_ARGUMENT")); got != 1 {
		t.Errorf("memory_requests_total{op=add_episode,api=http,code=INVALID_ARGUMENT} = %v, want 1", got)
	}
}

// TestMemoryValidation: each malformed request is InvalidArgument naming
// its field, and never reaches the memory service (which answers
// Unimplemented to the valid ones here).
func TestMemoryValidation(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t, nil)
	c := e.client
	long := strings.Repeat("x", MaxMemoryQueryBytes+1)
	search := &baagentv1.GatewayServiceSearchMemoryRequest{Query: "north"}
	add := &baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: "text"}
	graph := &baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: "en_1"}
	cases := []vt.Case{
		{Name: "SearchMemory/valid", Call: vt.Call(c.SearchMemory, search)},
		{Name: "SearchMemory/no query", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.Query = " " })), Field: "query"},
		{Name: "SearchMemory/long query", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.Query = long })), Field: "query"},
		{Name: "SearchMemory/mode", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.Mode = 42 })), Field: "mode"},
		{Name: "SearchMemory/top_k", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.TopK = MaxMemoryTopK + 1 })), Field: "top_k"},
		{Name: "SearchMemory/negative top_k", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.TopK = -1 })), Field: "top_k"},
		{Name: "SearchMemory/empty type", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.EntityTypes = []string{"Region", ""} })), Field: "entity_types[1]"},
		{Name: "SearchMemory/too many types", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) {
			r.EntityTypes = strings.Split(strings.Repeat("T,", MaxMemoryEntityTypes)+"T", ",")
		})), Field: "entity_types"},
		{Name: "SearchMemory/weight", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.KeywordWeight = ptr(1.5) })), Field: "keyword_weight"},
		{Name: "SearchMemory/rrf_k", Call: vt.Call(c.SearchMemory, vt.With(search, func(r *baagentv1.GatewayServiceSearchMemoryRequest) { r.RrfK = ptr[int32](0) })), Field: "rrf_k"},
		{Name: "AddMemoryEpisode/valid", Call: vt.Call(c.AddMemoryEpisode, add)},
		{Name: "AddMemoryEpisode/no content", Call: vt.Call(c.AddMemoryEpisode, vt.With(add, func(r *baagentv1.GatewayServiceAddMemoryEpisodeRequest) { r.Content = "" })), Field: "content"},
		{Name: "AddMemoryEpisode/long content", Call: vt.Call(c.AddMemoryEpisode, vt.With(add, func(r *baagentv1.GatewayServiceAddMemoryEpisodeRequest) {
			r.Content = strings.Repeat("x", MaxMemoryContentBytes+1)
		})), Field: "content"},
		{Name: "AddMemoryEpisode/conversation", Call: vt.Call(c.AddMemoryEpisode, vt.With(add, func(r *baagentv1.GatewayServiceAddMemoryEpisodeRequest) { r.ConversationId = "a/b" })), Field: "conversation_id"},
		{Name: "AddMemoryEpisode/key", Call: vt.Call(c.AddMemoryEpisode, vt.With(add, func(r *baagentv1.GatewayServiceAddMemoryEpisodeRequest) {
			r.IdempotencyKey = strings.Repeat("k", MaxMemoryIdempotencyKeyBytes+1)
		})), Field: "idempotency_key"},
		{Name: "ListMemoryEpisodes/valid", Call: vt.Call(c.ListMemoryEpisodes, &baagentv1.GatewayServiceListMemoryEpisodesRequest{})},
		{Name: "ListMemoryEpisodes/page_size", Call: vt.Call(c.ListMemoryEpisodes, &baagentv1.GatewayServiceListMemoryEpisodesRequest{PageSize: MaxPageSize + 1}), Field: "page_size"},
		{Name: "ListMemoryEpisodes/status", Call: vt.Call(c.ListMemoryEpisodes, &baagentv1.GatewayServiceListMemoryEpisodesRequest{Status: 9}), Field: "status"},
		{Name: "ListMemoryEpisodes/page_token", Call: vt.Call(c.ListMemoryEpisodes, &baagentv1.GatewayServiceListMemoryEpisodesRequest{PageToken: "a b"}), Field: "page_token"},
		{Name: "GetMemoryEpisode/no id", Call: vt.Call(c.GetMemoryEpisode, &baagentv1.GatewayServiceGetMemoryEpisodeRequest{}), Field: "id"},
		{Name: "DeleteMemoryEpisode/bad id", Call: vt.Call(c.DeleteMemoryEpisode, &baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: "../x"}), Field: "id"},
		{Name: "ListMemoryEntities/valid", Call: vt.Call(c.ListMemoryEntities, &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: "Person"})},
		{Name: "ListMemoryEntities/type", Call: vt.Call(c.ListMemoryEntities, &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: strings.Repeat("t", MaxMemoryEntityTypeBytes+1)}), Field: "type"},
		{Name: "ListMemoryEntities/prefix", Call: vt.Call(c.ListMemoryEntities, &baagentv1.GatewayServiceListMemoryEntitiesRequest{NamePrefix: strings.Repeat("n", MaxMemoryNamePrefixBytes+1)}), Field: "name_prefix"},
		{Name: "GetMemoryEntity/no id", Call: vt.Call(c.GetMemoryEntity, &baagentv1.GatewayServiceGetMemoryEntityRequest{}), Field: "id"},
		{Name: "DeleteMemoryEntity/no id", Call: vt.Call(c.DeleteMemoryEntity, &baagentv1.GatewayServiceDeleteMemoryEntityRequest{}), Field: "id"},
		{Name: "GetMemoryGraph/valid", Call: vt.Call(c.GetMemoryGraph, graph)},
		{Name: "GetMemoryGraph/no entity", Call: vt.Call(c.GetMemoryGraph, &baagentv1.GatewayServiceGetMemoryGraphRequest{}), Field: "entity_id"},
		{Name: "GetMemoryGraph/depth", Call: vt.Call(c.GetMemoryGraph, vt.With(graph, func(r *baagentv1.GatewayServiceGetMemoryGraphRequest) { r.Depth = MaxMemoryGraphDepth + 1 })), Field: "depth"},
		{Name: "GetMemoryGraph/max_nodes", Call: vt.Call(c.GetMemoryGraph, vt.With(graph, func(r *baagentv1.GatewayServiceGetMemoryGraphRequest) { r.MaxNodes = -1 })), Field: "max_nodes"},
		{Name: "GetMemoryStats/valid", Call: vt.Call(c.GetMemoryStats, &baagentv1.GatewayServiceGetMemoryStatsRequest{})},
		{Name: "GetMemorySettings/conversation", Call: vt.Call(c.GetMemorySettings, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: " "}), Field: "conversation_id"},
		{Name: "UpdateMemorySettings/valid", Call: vt.Call(c.UpdateMemorySettings, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{ToolsEnabled: ptr(true)})},
		{Name: "UpdateMemorySettings/nothing", Call: vt.Call(c.UpdateMemorySettings, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{}), Field: "capture_runs"},
		{Name: "UpdateMemorySettings/capture without conversation", Call: vt.Call(c.UpdateMemorySettings,
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationCapture: ptr(false)}), Field: "conversation_id"},
		{Name: "UpdateMemorySettings/conversation without capture", Call: vt.Call(c.UpdateMemorySettings,
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: "c1", CaptureRuns: ptr(true)}), Field: "conversation_capture"},
	}
	for i := range cases {
		call := cases[i].Call
		cases[i].Call = func(ctx context.Context) error { return call(withKey(ctx, keyAcme)) }
	}
	vt.Run(t, cases)
}

// TestMemoryHTTPQueryErrors: malformed query parameters are 400 naming
// the parameter, before any call.
func TestMemoryHTTPQueryErrors(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	for path, field := range map[string]string{
		"/v1/memory/search":                                             "query",
		"/v1/memory/search?q=x&mode=fuzzy":                              "mode",
		"/v1/memory/search?q=x&top_k=many":                              "top_k",
		"/v1/memory/search?q=x&top_k=1000":                              "top_k",
		"/v1/memory/search?q=x&vector_weight=NaN":                       "vector_weight",
		"/v1/memory/search?q=x&rrf_k=1.5":                               "rrf_k",
		"/v1/memory/episodes?status=done":                               "status",
		"/v1/memory/episodes?page_size=-1":                              "page_size",
		"/v1/memory/entities?page_size=x":                               "page_size",
		"/v1/memory/entities/en_1/graph?depth=9":                        "depth",
		"/v1/memory/entities/en_1/graph?max_nodes=1e3":                  "max_nodes",
		"/v1/memory/settings?conversation_id=" + url.QueryEscape("a b"): "conversation_id",
	} {
		r := e.do(t, keyAcme, "GET", path, "", nil)
		if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), field) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", path, r.code, r.raw, field)
		}
	}
	r := e.do(t, keyAcme, "PATCH", "/v1/memory/settings", "application/json", []byte(`{"conversation_capture":false}`))
	if r.code != http.StatusBadRequest || !strings.Contains(r.errFields(), "conversation_id") {
		t.Errorf("PATCH capture without conversation: %d %s", r.code, r.raw)
	}
	r = e.do(t, keyAcme, "POST", "/v1/memory/episodes", "application/json", []byte(`{"content":`))
	if r.code != http.StatusBadRequest {
		t.Errorf("POST truncated JSON: %d %s", r.code, r.raw)
	}
	if n := mem.count(); n != 0 {
		t.Errorf("the memory service received %d requests, want none", n)
	}
}

// TestMemoryPeerErrors: the memory service's NotFound (also its answer to
// another tenant's id) passes through as 404, a memory service that is
// down is 503, and a gateway without one answers Unavailable.
func TestMemoryPeerErrors(t *testing.T) {
	t.Parallel()
	mem := &recordingMemory{}
	e := newMemoryEnv(t, mem)
	mem.setFail(status.Error(codes.NotFound, "episode ep_9 not found"))
	if r := e.do(t, keyAcme, "GET", "/v1/memory/episodes/ep_9", "", nil); r.code != http.StatusNotFound || !strings.Contains(r.raw, "ep_9 not found") {
		t.Errorf("NotFound: %d %s", r.code, r.raw)
	}
	if got := testutil.ToFloat64(e.srv.memoryM.requests.WithLabelValues(memOpGetEpisode, apiHTTP, "NOT_FOUND")); got != 1 {
		t.Errorf("memory_requests_total{op=get_episode,api=http,code=NOT_FOUND} = %v, want 1", got)
	}
	mem.setFail(status.Error(codes.Unavailable, "store closed"))
	_, err := e.client.GetMemoryStats(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceGetMemoryStatsRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "memory service is unavailable") {
		t.Errorf("Unavailable: %v", err)
	}

	none := newEnv(t, Options{})
	if r := none.do(t, keyAcme, "GET", "/v1/memory/stats", "", nil); r.code != http.StatusServiceUnavailable || !strings.Contains(r.raw, "no memory connection") {
		t.Errorf("no memory peer: %d %s", r.code, r.raw)
	}
	_, err = none.client.SearchMemory(withKey(testCtx(t), keyAcme), &baagentv1.GatewayServiceSearchMemoryRequest{Query: "x"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("no memory peer over gRPC: %v", err)
	}
}

// FuzzMemoryHandlers feeds arbitrary requests to the memory RPCs: never a
// panic, always InvalidArgument or (from a memory service that implements
// nothing) Unimplemented.
func FuzzMemoryHandlers(f *testing.F) {
	opts := unimplementedPeers(f, Options{})
	opts.Memory = baagentv1.NewMemoryServiceClient(vt.Serve(f, func(grpc.ServiceRegistrar) {}))
	s := New(opts)
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.SearchMemory),
		vt.Handler(s.AddMemoryEpisode),
		vt.Handler(s.ListMemoryEpisodes),
		vt.Handler(s.GetMemoryEpisode),
		vt.Handler(s.DeleteMemoryEpisode),
		vt.Handler(s.ListMemoryEntities),
		vt.Handler(s.GetMemoryEntity),
		vt.Handler(s.DeleteMemoryEntity),
		vt.Handler(s.GetMemoryGraph),
		vt.Handler(s.GetMemoryStats),
		vt.Handler(s.GetMemorySettings),
		vt.Handler(s.UpdateMemorySettings),
	}
	corpus := []proto.Message{
		&baagentv1.GatewayServiceSearchMemoryRequest{Query: "north", TopK: 5, EntityTypes: []string{"Region"}, VectorWeight: ptr(0.4)},
		&baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: "North grew", ConversationId: "c1", IdempotencyKey: "k"},
		&baagentv1.GatewayServiceListMemoryEpisodesRequest{PageSize: 10, Status: baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED},
		&baagentv1.GatewayServiceGetMemoryEpisodeRequest{Id: "ep_1"},
		&baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: "ep_1"},
		&baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: "Region", NamePrefix: "N"},
		&baagentv1.GatewayServiceGetMemoryEntityRequest{Id: "en_1"},
		&baagentv1.GatewayServiceDeleteMemoryEntityRequest{Id: "en_1"},
		&baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: "en_1", Depth: 2, MaxNodes: 10},
		&baagentv1.GatewayServiceGetMemoryStatsRequest{},
		&baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: "c1"},
		&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: "c1", ConversationCapture: ptr(false)},
	}
	for i, m := range corpus {
		f.Add(uint8(i), vt.Marshal(f, m))
	}
	for i, h := range handlers {
		handlers[i] = func(ctx context.Context, data []byte) (bool, error) { return h(loopback(ctx), data) }
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		vt.Fuzz(t, handlers, which, data)
	})
}

// FuzzMemorySearchQuery parses arbitrary query strings of GET
// /v1/memory/search: never a panic; a query that parses and validates is
// within the limits the memory service accepts.
func FuzzMemorySearchQuery(f *testing.F) {
	for _, s := range []string{"q=north&mode=hybrid&top_k=5", "q=x&type=A,B&type=C&vector_weight=0.3&rrf_k=60",
		"query=x&mode=SEARCH_MODE_GRAPH", "q=%ff&top_k=-1", "q=x&graph_weight=Inf", "mode=&top_k=&rrf_k="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := &http.Request{URL: &url.URL{RawQuery: raw}}
		req, err := parseSearchQuery(r)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("parse error is not InvalidArgument: %v", err)
			}
			return
		}
		if validateSearchMemory(req) != nil {
			return
		}
		if req.GetQuery() == "" || len(req.GetQuery()) > MaxMemoryQueryBytes || req.GetTopK() < 0 || req.GetTopK() > MaxMemoryTopK ||
			len(req.GetEntityTypes()) > MaxMemoryEntityTypes || (req.RrfK != nil && (req.GetRrfK() < 1 || req.GetRrfK() > MaxMemoryRRFK)) {
			t.Fatalf("valid request out of limits: %v", req)
		}
		for _, w := range []*float64{req.VectorWeight, req.KeywordWeight, req.GraphWeight} {
			if w != nil && (*w < 0 || *w > 1) {
				t.Fatalf("valid weight out of range: %v", *w)
			}
		}
	})
}
