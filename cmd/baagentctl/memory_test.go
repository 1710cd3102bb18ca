package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// memGateway answers the memory RPCs of the gateway from a fixed graph of
// two entities, records every request, and refuses unknown ids.
type memGateway struct {
	baagentv1.UnimplementedGatewayServiceServer
	mu   sync.Mutex
	reqs []proto.Message
}

func (g *memGateway) record(m proto.Message) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reqs = append(g.reqs, proto.Clone(m))
}

func (g *memGateway) last() proto.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.reqs) == 0 {
		return nil
	}
	return g.reqs[len(g.reqs)-1]
}

func (g *memGateway) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

var (
	memNorth = &baagentv1.Entity{Id: "en_north", Name: "North region", Type: "Region", Summary: "Sales region with the fastest growth.", MentionCount: 3,
		Attributes: map[string]string{"manager": "Dana"}, CommunityId: "co_1"}
	memQ3       = &baagentv1.Entity{Id: "en_q3", Name: "Q3 revenue", Type: "Metric", MentionCount: 1}
	memRelation = &baagentv1.Relation{Id: "re_1", SourceId: "en_north", TargetId: "en_q3", Type: "REPORTS", Fact: "North reported Q3 revenue of 1.2M", Weight: 0.9}
	memEpisode  = &baagentv1.Episode{Id: "ep_1", Source: baagentv1.EpisodeSource_EPISODE_SOURCE_USER, Status: baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED,
		Content: "North grew 12% in Q3.", EntityIds: []string{"en_north", "en_q3"}}
)

func (g *memGateway) SearchMemory(_ context.Context, req *baagentv1.GatewayServiceSearchMemoryRequest) (*baagentv1.GatewayServiceSearchMemoryResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceSearchMemoryResponse{EmbeddingModel: "lexical-hash-v1", Hits: []*baagentv1.SearchHit{
		{Entity: memNorth, Score: 0.0123, Channels: []*baagentv1.ChannelRank{{Channel: "vector", Rank: 1}, {Channel: "keyword", Rank: 2}}},
	}}, nil
}

func (g *memGateway) AddMemoryEpisode(_ context.Context, req *baagentv1.GatewayServiceAddMemoryEpisodeRequest) (*baagentv1.GatewayServiceAddMemoryEpisodeResponse, error) {
	g.record(req)
	if req.GetConversationId() == "off" {
		return &baagentv1.GatewayServiceAddMemoryEpisodeResponse{Skipped: true}, nil
	}
	return &baagentv1.GatewayServiceAddMemoryEpisodeResponse{Episode: memEpisode}, nil
}

func (g *memGateway) ListMemoryEpisodes(_ context.Context, req *baagentv1.GatewayServiceListMemoryEpisodesRequest) (*baagentv1.GatewayServiceListMemoryEpisodesResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceListMemoryEpisodesResponse{Episodes: []*baagentv1.Episode{memEpisode}, NextPageToken: "tok2"}, nil
}

func (g *memGateway) GetMemoryEpisode(_ context.Context, req *baagentv1.GatewayServiceGetMemoryEpisodeRequest) (*baagentv1.GatewayServiceGetMemoryEpisodeResponse, error) {
	g.record(req)
	if req.GetId() != "ep_1" {
		return nil, status.Errorf(codes.NotFound, "episode %s not found", req.GetId())
	}
	return &baagentv1.GatewayServiceGetMemoryEpisodeResponse{Episode: memEpisode, Entities: []*baagentv1.Entity{memNorth, memQ3}}, nil
}

func (g *memGateway) DeleteMemoryEpisode(_ context.Context, req *baagentv1.GatewayServiceDeleteMemoryEpisodeRequest) (*baagentv1.GatewayServiceDeleteMemoryEpisodeResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceDeleteMemoryEpisodeResponse{EntitiesRemoved: 1, RelationsRemoved: 2}, nil
}

func (g *memGateway) ListMemoryEntities(_ context.Context, req *baagentv1.GatewayServiceListMemoryEntitiesRequest) (*baagentv1.GatewayServiceListMemoryEntitiesResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceListMemoryEntitiesResponse{Entities: []*baagentv1.Entity{memNorth, memQ3}}, nil
}

func (g *memGateway) GetMemoryEntity(_ context.Context, req *baagentv1.GatewayServiceGetMemoryEntityRequest) (*baagentv1.GatewayServiceGetMemoryEntityResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGetMemoryEntityResponse{Entity: memNorth, Relations: []*baagentv1.Relation{memRelation},
		RelatedNames: map[string]string{"en_q3": "Q3 revenue"}, Community: &baagentv1.Community{Id: "co_1", Name: "Regional sales", MemberCount: 4},
		Episodes: []*baagentv1.Episode{memEpisode}}, nil
}

func (g *memGateway) DeleteMemoryEntity(_ context.Context, req *baagentv1.GatewayServiceDeleteMemoryEntityRequest) (*baagentv1.GatewayServiceDeleteMemoryEntityResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceDeleteMemoryEntityResponse{RelationsRemoved: 5}, nil
}

func (g *memGateway) GetMemoryGraph(_ context.Context, req *baagentv1.GatewayServiceGetMemoryGraphRequest) (*baagentv1.GatewayServiceGetMemoryGraphResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGetMemoryGraphResponse{Entities: []*baagentv1.Entity{memNorth, memQ3}, Relations: []*baagentv1.Relation{memRelation}, Truncated: true}, nil
}

func (g *memGateway) GetMemoryStats(_ context.Context, req *baagentv1.GatewayServiceGetMemoryStatsRequest) (*baagentv1.GatewayServiceGetMemoryStatsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGetMemoryStatsResponse{Episodes: 9, EpisodesPending: 1, Entities: 2, Relations: 1, Backend: "sqlite", EmbeddingModel: "lexical-hash-v1"}, nil
}

func (g *memGateway) GetMemorySettings(_ context.Context, req *baagentv1.GatewayServiceGetMemorySettingsRequest) (*baagentv1.GatewayServiceGetMemorySettingsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceGetMemorySettingsResponse{Settings: &baagentv1.MemorySettings{CaptureRuns: true, CaptureDisabledConversations: []string{"conv-9"}}}, nil
}

func (g *memGateway) UpdateMemorySettings(_ context.Context, req *baagentv1.GatewayServiceUpdateMemorySettingsRequest) (*baagentv1.GatewayServiceUpdateMemorySettingsResponse, error) {
	g.record(req)
	return &baagentv1.GatewayServiceUpdateMemorySettingsResponse{Settings: &baagentv1.MemorySettings{CaptureRuns: req.GetCaptureRuns(), ToolsEnabled: true}}, nil
}

func TestMemoryCommands(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &memGateway{}
	srv := grpc.NewServer()
	baagentv1.RegisterGatewayServiceServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	env := map[string]string{"BAAGENT_ADDR": lis.Addr().String(), "BAAGENT_API_KEY": "test-key-0123456789"}
	run := func(args ...string) (int, string, string) { return ctlRun(testCtx(t), env, args[0], args[1:]...) }
	bp := func(v bool) *bool { return &v }

	cases := []struct {
		args []string
		want proto.Message // what the gateway must receive
		out  []string      // what the output must contain
	}{
		{[]string{"memory", "search", "north", "region", "--mode", "keyword", "--top-k", "5", "--type", "Region,Metric"},
			&baagentv1.GatewayServiceSearchMemoryRequest{Query: "north region", Mode: baagentv1.SearchMode_SEARCH_MODE_KEYWORD, TopK: 5, EntityTypes: []string{"Region", "Metric"}},
			[]string{"RANK", "en_north", "North region", "vector#1,keyword#2", "embedding: lexical-hash-v1"}},
		{[]string{"memory", "add", "Acme's", "fiscal", "year", "starts", "in", "April.", "--wait", "--conversation", "conv-1"},
			&baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: "Acme's fiscal year starts in April.", ConversationId: "conv-1", Wait: true},
			[]string{"episode ep_1 synced, 2 entities"}},
		{[]string{"memory", "add", "x", "--conversation", "off"}, &baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: "x", ConversationId: "off"},
			[]string{"not stored: memory is switched off"}},
		{[]string{"memory", "episodes", "list", "--status", "failed", "--page-size", "20"},
			&baagentv1.GatewayServiceListMemoryEpisodesRequest{Status: baagentv1.EpisodeStatus_EPISODE_STATUS_FAILED, PageSize: 20},
			[]string{"EPISODE_ID", "ep_1", "synced", "user", "North grew 12% in Q3.", "--page-token tok2"}},
		{[]string{"memory", "episodes", "show", "ep_1"}, &baagentv1.GatewayServiceGetMemoryEpisodeRequest{Id: "ep_1"},
			[]string{"episode", "North grew 12% in Q3.", "entities:", "Q3 revenue"}},
		{[]string{"memory", "episodes", "rm", "ep_1", "--yes"}, &baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: "ep_1"},
			[]string{"episode ep_1 deleted: 1 entities and 2 relations"}},
		{[]string{"memory", "entities", "list", "--type", "Region", "--prefix", "nor"}, &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: "Region", NamePrefix: "nor"},
			[]string{"ENTITY_ID", "en_north", "en_q3"}},
		{[]string{"memory", "entities", "show", "en_north"}, &baagentv1.GatewayServiceGetMemoryEntityRequest{Id: "en_north"},
			[]string{"North region", "manager", "Dana", "Regional sales (co_1, 4 members)", "North region —REPORTS→ Q3 revenue (0.90): North reported", "episodes:"}},
		{[]string{"memory", "entities", "rm", "en_north", "--yes"}, &baagentv1.GatewayServiceDeleteMemoryEntityRequest{Id: "en_north"},
			[]string{"entity en_north deleted with 5 relations"}},
		{[]string{"memory", "graph", "en_north", "--depth", "2", "--max-nodes", "30"}, &baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: "en_north", Depth: 2, MaxNodes: 30},
			[]string{"relations:", "—REPORTS→", "truncated"}},
		{[]string{"memory", "stats"}, &baagentv1.GatewayServiceGetMemoryStatsRequest{}, []string{"9 (1 pending, 0 failed)", "sqlite", "lexical-hash-v1"}},
		{[]string{"memory", "settings", "get", "--conversation", "conv-9"}, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: "conv-9"},
			[]string{"capture runs: on", "memory tools: off", "not captured: conv-9", "conversation conv-9 captured: off"}},
		{[]string{"memory", "settings", "set", "--capture-runs=false"}, &baagentv1.GatewayServiceUpdateMemorySettingsRequest{CaptureRuns: bp(false)},
			[]string{"capture runs: off"}},
		{[]string{"memory", "settings", "set", "--conversation", "conv-1", "--capture=false", "--tools"},
			&baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: "conv-1", ConversationCapture: bp(false), ToolsEnabled: bp(true)}, nil},
	}
	for _, tc := range cases {
		code, out, errOut := run(tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s\n%s", tc.args, code, out, errOut)
			continue
		}
		if got := g.last(); !proto.Equal(got, tc.want) {
			t.Errorf("%v: gateway received %v, want %v", tc.args, got, tc.want)
		}
		for _, s := range tc.out {
			if !strings.Contains(out, s) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, s, out)
			}
		}
	}

	// Machine-readable output.
	code, out, _ := run("memory", "search", "north", "-o", "json")
	var sr struct {
		Hits []struct {
			Entity struct {
				ID string `json:"id"`
			} `json:"entity"`
		} `json:"hits"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sr) != nil || len(sr.Hits) != 1 || sr.Hits[0].Entity.ID != "en_north" {
		t.Errorf("search -o json: exit %d\n%s", code, out)
	}
	code, out, _ = run("memory", "stats", "-o", "yaml")
	var st map[string]any
	if code != 0 || yaml.Unmarshal([]byte(out), &st) != nil || st["backend"] != "sqlite" {
		t.Errorf("stats -o yaml: exit %d\n%s", code, out)
	}

	// Text from standard input.
	var stdout testkit.SyncBuffer
	code, errOut := ctlRunIn(testCtx(t), env, "Remember this from stdin.\n", &stdout, "memory", "add")
	if code != 0 {
		t.Errorf("add from stdin: exit %d %s", code, errOut)
	} else if got, _ := g.last().(*baagentv1.GatewayServiceAddMemoryEpisodeRequest); got.GetContent() != "Remember this from stdin.\n" {
		t.Errorf("add from stdin sent %v", g.last())
	}

	// Usage errors never reach the gateway.
	before := g.count()
	for _, bad := range [][]string{
		{"memory", "search"},
		{"memory", "search", "x", "--mode", "fuzzy"},
		{"memory", "episodes", "list", "--status", "done"},
		{"memory", "episodes", "rm", "ep_1"},
		{"memory", "entities", "rm", "en_north"},
		{"memory", "episodes", "show"},
		{"memory", "graph"},
		{"memory", "settings", "set"},
		{"memory", "settings", "set", "--capture=false"},
		{"memory", "settings", "set", "--conversation", "conv-1"},
		{"memory", "add", "text", "--file", "notes.md"},
		{"memory", "stats", "extra"},
	} {
		if code, _, errOut := run(bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errOut)
		}
	}
	if n := g.count(); n != before {
		t.Errorf("usage errors made %d calls", n-before)
	}
	if code, _, errOut := run("memory", "episodes", "show", "ep_x"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("show unknown: exit %d, %q", code, errOut)
	}
}
