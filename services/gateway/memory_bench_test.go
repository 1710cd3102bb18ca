package gateway

import (
	"context"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// BenchmarkMemorySearch measures what the gateway adds to a memory
// search: the same SearchRequest straight to a memory service on loopback
// (direct), through the gateway's gRPC API, and through GET
// /v1/memory/search. The memory service answers at once with ten hits, so
// the differences are the gateway's authentication, limits, validation,
// forwarding and (HTTP) JSON rendering.
func BenchmarkMemorySearch(b *testing.B) {
	mem := &benchMemory{}
	conn := vt.Serve(b, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMemoryServiceServer(gs, mem) })
	memClient := baagentv1.NewMemoryServiceClient(conn)
	e := newEnvTB(b, Options{Memory: memClient}) // RateLimit 0: no per-key limit
	ctx := context.Background()

	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := memClient.Search(ctx, &baagentv1.SearchRequest{Tenant: "acme", Query: "north region revenue"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gateway-grpc", func(b *testing.B) {
		kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keyAcme)
		for b.Loop() {
			if _, err := e.client.SearchMemory(kctx, &baagentv1.GatewayServiceSearchMemoryRequest{Query: "north region revenue"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gateway-http", func(b *testing.B) {
		u := e.base + "/v1/memory/search?q=north+region+revenue"
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			req.Header.Set("Authorization", "Bearer "+keyAcme)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// benchMemory answers every search with the same ten hits.
type benchMemory struct {
	baagentv1.UnimplementedMemoryServiceServer
}

var benchHits = func() *baagentv1.SearchResponse {
	r := &baagentv1.SearchResponse{EmbeddingModel: "lexical-hash-v1"}
	for i := range 10 {
		r.Hits = append(r.Hits, &baagentv1.SearchHit{
			Entity: &baagentv1.Entity{Id: "en_" + string(rune('a'+i)), Name: "North region", Type: "Region", Summary: "Sales region with the fastest growth in 2026."},
			Score:  1 / float64(61+i), Channels: []*baagentv1.ChannelRank{{Channel: "vector", Rank: int32(i + 1)}, {Channel: "keyword", Rank: int32(i + 1)}}, //nolint:gosec // small
			Relations: []*baagentv1.Relation{{Id: "re_1", SourceId: "en_a", TargetId: "en_b", Type: "REPORTS", Fact: "North reported Q3 revenue", Weight: 0.9}},
		})
	}
	return r
}()

func (benchMemory) Search(context.Context, *baagentv1.SearchRequest) (*baagentv1.SearchResponse, error) {
	return benchHits, nil
}
