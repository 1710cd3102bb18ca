package toolrunner

import (
	"context"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// memoryStub is a MemoryService with memory tools on for tenant acme and
// one search hit.
type memoryStub struct {
	baagentv1.UnimplementedMemoryServiceServer
}

func (memoryStub) GetMemorySettings(_ context.Context, req *baagentv1.GetMemorySettingsRequest) (*baagentv1.GetMemorySettingsResponse, error) {
	return &baagentv1.GetMemorySettingsResponse{Settings: &baagentv1.MemorySettings{ToolsEnabled: req.GetTenant() == "acme"}}, nil
}

func (memoryStub) Search(context.Context, *baagentv1.SearchRequest) (*baagentv1.SearchResponse, error) {
	return &baagentv1.SearchResponse{Hits: []*baagentv1.SearchHit{{
		Entity: &baagentv1.Entity{Id: "en_soft", Name: "Software", Type: "Category", Summary: "Licences."}, Score: 0.03,
	}}}, nil
}

func memoryStubClient(t *testing.T) baagentv1.MemoryServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterMemoryServiceServer(gs, memoryStub{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return baagentv1.NewMemoryServiceClient(cc)
}

func TestMemorySearchResultCarriesHits(t *testing.T) {
	mem := memoryStubClient(t)
	s, _ := newTestServer(t, func(o *Options) { o.Memory = mem })
	list := func(tenant string) []string {
		resp, err := s.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range resp.GetTools() {
			names = append(names, d.GetSchema().GetName())
		}
		return names
	}
	if got := list("acme"); !slices.Contains(got, "memory_search") || !slices.Contains(got, "memory_add") {
		t.Fatalf("acme's tools %v lack the memory tools", got)
	}
	if got := list("globex"); slices.Contains(got, "memory_search") {
		t.Fatalf("globex (memory tools off) offered %v", got)
	}
	res := mustInvoke(t, s, req("memory_search", map[string]any{"query": "Software"}))
	if !res.GetSuccess() {
		t.Fatalf("memory_search failed: %s", res.GetObservation())
	}
	hits := res.GetMemoryHits()
	if len(hits) != 1 || hits[0].GetEntity().GetId() != "en_soft" || hits[0].GetEntity().GetName() != "Software" || hits[0].GetScore() != 0.03 {
		t.Fatalf("memory_hits %v", hits)
	}
	if res.GetObservation() == "" {
		t.Fatal("no observation")
	}
	off := req("memory_search", map[string]any{"query": "Software"})
	off.Tenant = "globex"
	if res := mustInvoke(t, s, off); res.GetSuccess() || res.GetErrorCode() != "MEMORY_TOOLS_DISABLED" || len(res.GetMemoryHits()) != 0 {
		t.Fatalf("globex's call: success %v code %s", res.GetSuccess(), res.GetErrorCode())
	}
}
