package contextsvc

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// benchConversation is the acceptance conversation of the benchmarks: 1,000
// messages, about 200K tokens (gpt-4o).
func benchEnv(b *testing.B) (*env, *baagentv1.BuildWindowRequest) {
	b.Helper()
	e := newEnv(b, Options{})
	hist, _ := genConversation(bigSpec, 42)
	hist = hist[:1000]
	appendAll(b, e.client, "t", "c", hist)
	req := buildReqFor("gpt-4o", strategyExtract)
	// Without pruning, so that the strategy itself does the work.
	req.Budget = &baagentv1.BudgetOptions{PruneToolOutputs: proto.Bool(false)}
	return e, req
}

// BenchmarkBuildWindow: a 1,000-message, 200K-token conversation with a warm
// count cache (the target is at most 5 ms per window).
func BenchmarkBuildWindow(b *testing.B) {
	e, req := benchEnv(b)
	ctx := context.Background()
	resp, err := e.srv.BuildWindow(ctx, req) // warms the caches
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("window: %d of %d messages, %d tokens, strategy %v, original ~200K tokens",
		len(resp.GetMessages()), resp.GetCompression().GetOriginalMessageCount(), resp.GetBreakdown().GetTotalTokens(), resp.GetStrategy())
	misses := testutil.ToFloat64(e.srv.metrics.countCacheMisses)
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.srv.BuildWindow(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((testutil.ToFloat64(e.srv.metrics.countCacheMisses)-misses)/float64(b.N), "counted-msgs/op")
}

// BenchmarkBuildWindowCold: the same window with empty caches (a new
// server each time): every message is counted by the tokens service.
func BenchmarkBuildWindowCold(b *testing.B) {
	e, req := benchEnv(b)
	ctx := context.Background()
	var counted float64
	for b.Loop() {
		b.StopTimer()
		s := New(Options{JetStream: e.nats.js, Tokens: e.tokens, Logger: discardLogger()})
		b.StartTimer()
		if _, err := s.BuildWindow(ctx, req); err != nil {
			b.Fatal(err)
		}
		counted += testutil.ToFloat64(s.metrics.countCacheMisses)
	}
	b.ReportMetric(counted/float64(b.N), "counted-msgs/op")
}

// BenchmarkAppendAndRebuild: append one message, then rebuild the window;
// counting costs one message (counted-msgs/op), against about 1,000 for a
// cold build.
func BenchmarkAppendAndRebuild(b *testing.B) {
	e, req := benchEnv(b)
	ctx := context.Background()
	if _, err := e.srv.BuildWindow(ctx, req); err != nil {
		b.Fatal(err)
	}
	misses := testutil.ToFloat64(e.srv.metrics.countCacheMisses)
	i := 0
	for b.Loop() {
		i++
		m := &baagentv1.ChatMessage{Id: fmt.Sprintf("bench-%d", i), Role: roleAssistant, Content: fmt.Sprintf("Step %d: the north region grew %d%%.", i, i%40)}
		if _, err := e.srv.Append(ctx, &baagentv1.AppendRequest{Tenant: "t", ConversationId: "c", Messages: []*baagentv1.ChatMessage{m}}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.srv.BuildWindow(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((testutil.ToFloat64(e.srv.metrics.countCacheMisses)-misses)/float64(b.N), "counted-msgs/op")
}
