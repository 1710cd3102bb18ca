package skills

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/tokens"
)

// TestTokensServiceCounter counts catalogs through a real tokens service
// over loopback gRPC, and falls back to the estimate when it is down.
func TestTokensServiceCounter(t *testing.T) {
	t.Parallel()

	ts, err := tokens.New(tokens.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tokensClient := baagentv1.NewTokensServiceClient(vt.Serve(t, ts.Register))
	counter := NewTokensServiceCounter(tokensClient, 0)

	n, err := counter.CountTokens(t.Context(), "hello world", "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	direct, err := tokensClient.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: "hello world"})
	if err != nil || int64(n) != direct.GetCount() || n == 0 {
		t.Fatalf("counter %d, service %v (%v)", n, direct.GetCount(), err)
	}

	_, c := serveExamples(t, func(o *Options) { o.Counter = counter })
	var header metadata.MD
	cat, err := c.GetCatalog(t.Context(), &baagentv1.GetCatalogRequest{Tenant: "acme", Model: "gpt-4o"}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if got := header.Get(TokenSourceHeader); len(got) != 1 || got[0] != "counter" {
		t.Errorf("%s = %v, want counter", TokenSourceHeader, got)
	}
	exact, err := tokensClient.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: "gpt-4o", Text: cat.GetText()})
	if err != nil || cat.GetTokens() != exact.GetCount() {
		t.Fatalf("catalog tokens %d, tokens service %v (%v)", cat.GetTokens(), exact.GetCount(), err)
	}
	// The fallback estimate errs high against the real tokenizers.
	for _, model := range []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5", "qwen-max"} {
		r, err := tokensClient.CountTokens(t.Context(), &baagentv1.CountTokensRequest{Model: model, Text: cat.GetText()})
		if err != nil {
			t.Fatal(err)
		}
		if est := EstimateTokens(cat.GetText()); int64(est) < r.GetRawCount() {
			t.Errorf("%s: estimate %d below the tokenizer's %d", model, est, r.GetRawCount())
		}
	}
	// A budget is met as the model's tokenizer counts it.
	small, err := c.GetCatalog(t.Context(), &baagentv1.GetCatalogRequest{Tenant: "acme", Model: "gpt-4o", TokenBudget: exact.GetCount() / 2})
	if err != nil || small.GetTokens() > exact.GetCount()/2 || small.GetShortenedCount()+small.GetNameOnlyCount() == 0 {
		t.Fatalf("half budget: %v, %v", small, err)
	}

	// The tokens service is down: the estimate is used and the header says so.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	conn, err := grpc.NewClient(dead, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	down := NewTokensServiceCounter(baagentv1.NewTokensServiceClient(conn), time.Second)
	if _, err := down.CountTokens(context.Background(), "x", "gpt-4o"); err == nil {
		t.Fatal("counting through a dead address succeeded")
	}
	_, c = serveExamples(t, func(o *Options) { o.Counter = down })
	header = nil
	cat, err = c.GetCatalog(t.Context(), &baagentv1.GetCatalogRequest{Tenant: "acme", Model: "gpt-4o", TokenBudget: 300}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if got := header.Get(TokenSourceHeader); len(got) != 1 || got[0] != "estimate-fallback" {
		t.Errorf("%s = %v, want estimate-fallback", TokenSourceHeader, got)
	}
	if cat.GetTokens() != int64(EstimateTokens(cat.GetText())) || cat.GetTokens() > 300 {
		t.Errorf("fallback catalog: %d tokens, estimate %d", cat.GetTokens(), EstimateTokens(cat.GetText()))
	}
	var nilCounter *TokensServiceCounter
	if _, err := nilCounter.CountTokens(context.Background(), "x", "m"); err == nil {
		t.Error("a nil counter counted")
	}
}
