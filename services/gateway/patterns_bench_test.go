package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// BenchmarkPatternsAPI measures what the gateway adds to the patterns
// API: a page of 50 patterns straight from a memory service on loopback
// (direct), through ListPatterns and through GET /v1/patterns, and an edit
// through PATCH /v1/patterns/{id} with If-Match (the flat body parsed,
// validated and forwarded). The memory service answers at once, so the
// differences are the gateway's authentication, limits, validation,
// forwarding and (HTTP) JSON parsing and rendering.
func BenchmarkPatternsAPI(b *testing.B) {
	mem := &benchPatterns{}
	conn := vt.Serve(b, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMemoryServiceServer(gs, mem) })
	memClient := baagentv1.NewMemoryServiceClient(conn)
	e := newEnvTB(b, Options{Memory: memClient}) // RateLimit 0: no per-key limit
	ctx := context.Background()

	b.Run("list-direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := memClient.ListPatterns(ctx, &baagentv1.ListPatternsRequest{Tenant: "acme", PageSize: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-gateway-grpc", func(b *testing.B) {
		kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keyAcme)
		for b.Loop() {
			if _, err := e.client.ListPatterns(kctx, &baagentv1.GatewayServiceListPatternsRequest{PageSize: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-gateway-http", func(b *testing.B) {
		for b.Loop() {
			benchHTTP(b, ctx, http.MethodGet, e.base+"/v1/patterns?page_size=50&state=active", nil)
		}
	})
	body := []byte(`{"name":"Regional revenue report","steps":[{"description":"Query revenue by region","tools":["sql_query"]},` +
		`{"description":"Chart it","tools":["chart"],"corrections":["label the axes"]}],"tool_chain":["sql_query","chart"]}`)
	b.Run("edit-gateway-http", func(b *testing.B) {
		for b.Loop() {
			benchHTTP(b, ctx, http.MethodPatch, e.base+"/v1/patterns/pt_01", body, "If-Match", `"3"`)
		}
	})
}

func benchHTTP(b *testing.B, ctx context.Context, method, u string, body []byte, headers ...string) {
	req, _ := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s %s: status %d", method, u, resp.StatusCode)
	}
}

// benchPatterns answers every list with the same 50 patterns and every
// edit with the first.
type benchPatterns struct {
	baagentv1.UnimplementedMemoryServiceServer
}

var benchPatternPage = func() *baagentv1.ListPatternsResponse {
	r := &baagentv1.ListPatternsResponse{NextPageToken: "next"}
	ts := timestamppb.Now()
	for i := range 50 {
		r.Patterns = append(r.Patterns, &baagentv1.InteractionPattern{
			Id: fmt.Sprintf("pt_%026d", i), Tenant: "acme", Name: "Regional revenue report", Description: "Revenue by region for a quarter, charted.",
			TaskType: "report", EntityTypes: []string{"Metric", "Region"}, Entities: []string{"north region", "q3 revenue", "south region"},
			Steps: []*baagentv1.PatternStep{
				{Description: "Query revenue by region", Tools: []string{"sql_query"}, ExpectedOutput: "one row per region", Corrections: []string{"use the fiscal quarter"}},
				{Description: "Chart it", Tools: []string{"chart"}},
				{Description: "Summarise the change", ExpectedOutput: "three sentences"},
			},
			ToolChains: []*baagentv1.ToolChain{{Tools: []string{"sql_query", "chart"}}, {Tools: []string{"sql_query"}}},
			Decisions:  []*baagentv1.PatternDecision{{Question: "Which quarter?", Recommended: "Q3", Choices: map[string]int32{"Q3": 4, "Q2": 1}}},
			SuccessFactors: &baagentv1.PatternSuccessFactors{ClarificationsNeeded: 1, CriticalDecisions: []string{"Which quarter?"},
				CommonCorrections: []string{"use the fiscal quarter"}},
			UsageCount: 12, SuccessCount: 10, FailureCount: 2, SuccessRate: 0.83, EffectiveSuccessRate: 0.83, AvgDurationMs: 42000,
			State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, Version: 3, CreatedAt: ts, UpdatedAt: ts, LastQueriedAt: ts, LastUsedAt: ts,
		})
	}
	return r
}()

func (benchPatterns) ListPatterns(context.Context, *baagentv1.ListPatternsRequest) (*baagentv1.ListPatternsResponse, error) {
	return benchPatternPage, nil
}

func (benchPatterns) UpdatePattern(context.Context, *baagentv1.UpdatePatternRequest) (*baagentv1.UpdatePatternResponse, error) {
	return &baagentv1.UpdatePatternResponse{Pattern: benchPatternPage.GetPatterns()[0]}, nil
}
