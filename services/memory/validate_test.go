package memory

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

func f64(v float64) *float64 { return &v }
func i32(v int32) *int32     { return &v }
func yes(v bool) *bool       { return &v }

// TestValidation checks that every RPC refuses bad input with
// InvalidArgument naming the field, before touching the store.
func TestValidation(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	epID := newID(episodePrefix, ts.srv.now())
	enID := newID(entityPrefix, ts.srv.now())
	long := strings.Repeat("x", MaxContentBytes+1)

	add := &baagentv1.AddEpisodeRequest{Tenant: "acme", Content: "hello"}
	search := &baagentv1.SearchRequest{Tenant: "acme", Query: "hello"}
	graph := &baagentv1.GetGraphRequest{Tenant: "acme", EntityId: enID}
	type tc struct {
		name  string
		call  func(context.Context) error
		field string
	}
	cases := []tc{
		{"AddEpisode/no tenant", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Tenant = "" })), "tenant"},
		{"AddEpisode/bad tenant", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Tenant = "a.b" })), "tenant"},
		{"AddEpisode/no content", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Content = "" })), "content"},
		{"AddEpisode/blank content", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Content = " \n " })), "content"},
		{"AddEpisode/content too long", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Content = long })), "content"},
		// gRPC refuses to send invalid UTF-8: call the handler.
		{"AddEpisode/content not UTF-8", vt.Call(func(ctx context.Context, r *baagentv1.AddEpisodeRequest, _ ...grpc.CallOption) (*baagentv1.AddEpisodeResponse, error) {
			return ts.srv.AddEpisode(ctx, r)
		}, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Content = "a\xffb" })), "content"},
		{"AddEpisode/NUL in content", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Content = "a\x00b" })), "content"},
		{"AddEpisode/unknown source", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.Source = 9 })), "source"},
		{"AddEpisode/bad conversation", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.ConversationId = "a/b" })), "conversation_id"},
		{"AddEpisode/bad run", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.RunId = "run.1" })), "run_id"},
		{"AddEpisode/key too long", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.IdempotencyKey = strings.Repeat("k", 129) })), "idempotency_key"},
		{"AddEpisode/key with space", vt.Call(c.AddEpisode, vt.With(add, func(r *baagentv1.AddEpisodeRequest) { r.IdempotencyKey = "a b" })), "idempotency_key"},

		{"GetEpisode/no tenant", vt.Call(c.GetEpisode, &baagentv1.GetEpisodeRequest{Id: epID}), "tenant"},
		{"GetEpisode/no id", vt.Call(c.GetEpisode, &baagentv1.GetEpisodeRequest{Tenant: "acme"}), "id"},
		{"GetEpisode/entity id", vt.Call(c.GetEpisode, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: enID}), "id"},
		{"GetEpisode/short id", vt.Call(c.GetEpisode, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: epID[:20]}), "id"},
		{"GetEpisode/upper-case prefix", vt.Call(c.GetEpisode, &baagentv1.GetEpisodeRequest{Tenant: "acme", Id: strings.ToUpper(epID)}), "id"},
		{"DeleteEpisode/bad id", vt.Call(c.DeleteEpisode, &baagentv1.DeleteEpisodeRequest{Tenant: "acme", Id: "ep_x"}), "id"},
		{"DeleteEpisode/no tenant", vt.Call(c.DeleteEpisode, &baagentv1.DeleteEpisodeRequest{Id: epID}), "tenant"},

		{"ListEpisodes/no tenant", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{}), "tenant"},
		{"ListEpisodes/page size", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{Tenant: "acme", PageSize: 501}), "page_size"},
		{"ListEpisodes/negative page size", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{Tenant: "acme", PageSize: -1}), "page_size"},
		{"ListEpisodes/page token", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{Tenant: "acme", PageToken: "a b"}), "page_token"},
		{"ListEpisodes/status", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{Tenant: "acme", Status: 7}), "status"},
		{"ListEpisodes/conversation", vt.Call(c.ListEpisodes, &baagentv1.ListEpisodesRequest{Tenant: "acme", ConversationId: ".x"}), "conversation_id"},

		{"Search/no tenant", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.Tenant = "" })), "tenant"},
		{"Search/no query", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.Query = "" })), "query"},
		{"Search/query too long", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.Query = strings.Repeat("q", MaxQueryBytes+1) })), "query"},
		{"Search/NUL in query", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.Query = "a\x00b" })), "query"},
		{"Search/mode", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.Mode = 5 })), "mode"},
		{"Search/top_k high", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.TopK = 101 })), "top_k"},
		{"Search/top_k negative", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.TopK = -1 })), "top_k"},
		{"Search/negative weight", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.KeywordWeight = f64(-0.1) })), "keyword_weight"},
		{"Search/weights all zero", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) {
			r.VectorWeight, r.KeywordWeight, r.GraphWeight = f64(0), f64(0), f64(0)
		})), "vector_weight"},
		{"Search/rrf_k zero", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.RrfK = i32(0) })), "rrf_k"},
		{"Search/rrf_k high", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.RrfK = i32(1001) })), "rrf_k"},
		{"Search/empty type", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.EntityTypes = []string{"Person", ""} })), "entity_types[1]"},
		{"Search/too many types", vt.Call(c.Search, vt.With(search, func(r *baagentv1.SearchRequest) { r.EntityTypes = make([]string, MaxEntityTypes+1) })), "entity_types"},

		{"GetEntity/bad id", vt.Call(c.GetEntity, &baagentv1.GetEntityRequest{Tenant: "acme", Id: epID}), "id"},
		{"GetEntity/no tenant", vt.Call(c.GetEntity, &baagentv1.GetEntityRequest{Id: enID}), "tenant"},
		{"DeleteEntity/bad id", vt.Call(c.DeleteEntity, &baagentv1.DeleteEntityRequest{Tenant: "acme", Id: "en_"}), "id"},
		{"ListEntities/no tenant", vt.Call(c.ListEntities, &baagentv1.ListEntitiesRequest{}), "tenant"},
		{"ListEntities/page size", vt.Call(c.ListEntities, &baagentv1.ListEntitiesRequest{Tenant: "acme", PageSize: 1000}), "page_size"},
		{"ListEntities/type", vt.Call(c.ListEntities, &baagentv1.ListEntitiesRequest{Tenant: "acme", Type: strings.Repeat("T", 65)}), "type"},
		{"ListEntities/prefix", vt.Call(c.ListEntities, &baagentv1.ListEntitiesRequest{Tenant: "acme", NamePrefix: strings.Repeat("p", 257)}), "name_prefix"},

		{"GetGraph/no entity", vt.Call(c.GetGraph, vt.With(graph, func(r *baagentv1.GetGraphRequest) { r.EntityId = "" })), "entity_id"},
		{"GetGraph/depth", vt.Call(c.GetGraph, vt.With(graph, func(r *baagentv1.GetGraphRequest) { r.Depth = 4 })), "depth"},
		{"GetGraph/negative depth", vt.Call(c.GetGraph, vt.With(graph, func(r *baagentv1.GetGraphRequest) { r.Depth = -1 })), "depth"},
		{"GetGraph/max_nodes", vt.Call(c.GetGraph, vt.With(graph, func(r *baagentv1.GetGraphRequest) { r.MaxNodes = 501 })), "max_nodes"},

		{"Stats/no tenant", vt.Call(c.Stats, &baagentv1.StatsRequest{}), "tenant"},
		{"GetMemorySettings/no tenant", vt.Call(c.GetMemorySettings, &baagentv1.GetMemorySettingsRequest{}), "tenant"},
		{"GetMemorySettings/conversation", vt.Call(c.GetMemorySettings, &baagentv1.GetMemorySettingsRequest{Tenant: "acme", ConversationId: "a b"}), "conversation_id"},
		{"UpdateMemorySettings/no tenant", vt.Call(c.UpdateMemorySettings, &baagentv1.UpdateMemorySettingsRequest{}), "tenant"},
		{"UpdateMemorySettings/capture without conversation", vt.Call(c.UpdateMemorySettings,
			&baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", ConversationCapture: yes(false)}), "conversation_id"},
		{"UpdateMemorySettings/conversation without capture", vt.Call(c.UpdateMemorySettings,
			&baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", ConversationId: "conv-1"}), "conversation_capture"},
		{"DeleteConversationMemory/no conversation", vt.Call(c.DeleteConversationMemory, &baagentv1.DeleteConversationMemoryRequest{Tenant: "acme"}), "conversation_id"},
		{"DeleteConversationMemory/no tenant", vt.Call(c.DeleteConversationMemory, &baagentv1.DeleteConversationMemoryRequest{ConversationId: "c"}), "tenant"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vt.WantInvalid(t, tc.call(t.Context()), tc.field)
		})
	}
	// Nothing reached the store.
	st, err := ts.store.Stats(t.Context(), "acme")
	if err != nil || st.Episodes != 0 {
		t.Fatalf("stats after invalid calls: %+v, %v", st, err)
	}
}

// FuzzHandlers feeds arbitrary bytes as each request type to the handlers
// (no gRPC in between) over a real store: nothing panics, a refusal is
// InvalidArgument with a BadRequest detail, and nothing ends in Internal.
func FuzzHandlers(f *testing.F) {
	ts := newTestServer(f, Options{MaxWait: 10 * time.Millisecond}, false)
	s := ts.srv
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.AddEpisode), vt.Handler(s.GetEpisode), vt.Handler(s.ListEpisodes), vt.Handler(s.DeleteEpisode),
		vt.Handler(s.Search), vt.Handler(s.GetEntity), vt.Handler(s.ListEntities), vt.Handler(s.DeleteEntity),
		vt.Handler(s.GetGraph), vt.Handler(s.Stats), vt.Handler(s.GetMemorySettings), vt.Handler(s.UpdateMemorySettings),
		vt.Handler(s.DeleteConversationMemory),
	}
	now := time.Now()
	for i, m := range []proto.Message{
		&baagentv1.AddEpisodeRequest{Tenant: "acme", Content: "Acme Labs ordered 4 Edge Router R1", Wait: true},
		&baagentv1.GetEpisodeRequest{Tenant: "acme", Id: newID(episodePrefix, now)},
		&baagentv1.ListEpisodesRequest{Tenant: "acme", PageSize: 3, PageToken: "abc"},
		&baagentv1.DeleteEpisodeRequest{Tenant: "acme", Id: newID(episodePrefix, now)},
		&baagentv1.SearchRequest{Tenant: "acme", Query: "Acme Labs routers", EntityTypes: []string{"Product"}, RrfK: i32(5)},
		&baagentv1.GetEntityRequest{Tenant: "acme", Id: newID(entityPrefix, now)},
		&baagentv1.ListEntitiesRequest{Tenant: "acme", NamePrefix: "Ac", PageToken: "zz"},
		&baagentv1.DeleteEntityRequest{Tenant: "acme", Id: newID(entityPrefix, now)},
		&baagentv1.GetGraphRequest{Tenant: "acme", EntityId: newID(entityPrefix, now), Depth: 3},
		&baagentv1.StatsRequest{Tenant: "acme"},
		&baagentv1.GetMemorySettingsRequest{Tenant: "acme", ConversationId: "c1"},
		&baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", ConversationId: "c1", ConversationCapture: yes(false)},
		&baagentv1.DeleteConversationMemoryRequest{Tenant: "acme", ConversationId: "c1"},
	} {
		f.Add(uint8(i), vt.Marshal(f, m))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ok, err := handlers[int(which)%len(handlers)](t.Context(), data)
		if !ok || err == nil {
			return
		}
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.NotFound, codes.ResourceExhausted:
		case codes.InvalidArgument:
			if cerr := vt.CheckEdge(err); cerr != nil {
				t.Fatal(cerr)
			}
		default:
			t.Fatalf("handler %d: %v", int(which)%len(handlers), err)
		}
	})
}
