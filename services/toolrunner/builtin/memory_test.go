package builtin

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

// memoryFake is a MemoryService answering from fields the test sets.
type memoryFake struct {
	baagentv1.UnimplementedMemoryServiceServer
	mu        sync.Mutex
	enabled   map[string]bool
	down      error
	settings  int
	searches  []*baagentv1.SearchRequest
	adds      []*baagentv1.AddEpisodeRequest
	hits      []*baagentv1.SearchHit
	episodeID map[string]string
}

func (f *memoryFake) GetMemorySettings(_ context.Context, req *baagentv1.GetMemorySettingsRequest) (*baagentv1.GetMemorySettingsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settings++
	if f.down != nil {
		return nil, f.down
	}
	return &baagentv1.GetMemorySettingsResponse{Settings: &baagentv1.MemorySettings{ToolsEnabled: f.enabled[req.GetTenant()], CaptureRuns: true}}, nil
}

func (f *memoryFake) Search(_ context.Context, req *baagentv1.SearchRequest) (*baagentv1.SearchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, f.down
	}
	f.searches = append(f.searches, req)
	return &baagentv1.SearchResponse{Hits: f.hits, EmbeddingModel: "lexical-hash-v1"}, nil
}

func (f *memoryFake) AddEpisode(_ context.Context, req *baagentv1.AddEpisodeRequest) (*baagentv1.AddEpisodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, f.down
	}
	f.adds = append(f.adds, req)
	if f.episodeID == nil {
		f.episodeID = map[string]string{}
	}
	id, ok := f.episodeID[req.GetIdempotencyKey()]
	if !ok {
		id = "ep_" + strings.Repeat("0", 25) + string(rune('A'+len(f.episodeID)))
		f.episodeID[req.GetIdempotencyKey()] = id
	}
	return &baagentv1.AddEpisodeResponse{Episode: &baagentv1.Episode{Id: id, Redactions: 1}}, nil
}

func memoryClient(t *testing.T, f *memoryFake) baagentv1.MemoryServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterMemoryServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return baagentv1.NewMemoryServiceClient(cc)
}

func sampleHits() []*baagentv1.SearchHit {
	return []*baagentv1.SearchHit{
		{
			Entity: &baagentv1.Entity{Id: "en_soft", Name: "Software", Type: "Category", Summary: "Licences and\nsubscriptions sold to businesses.", Attributes: map[string]string{"k": "v"}},
			Score:  0.032,
			Relations: []*baagentv1.Relation{
				{Id: "re_1", SourceId: "en_soft", TargetId: "en_emea", Type: "SOLD_IN", Weight: 0.9},
				{Id: "re_2", SourceId: "en_acme", TargetId: "en_soft", Type: "SELLS", Weight: 0.8},
			},
			RelatedNames: map[string]string{"en_emea": "EMEA", "en_acme": "Acme Corp"},
			Community:    &baagentv1.Community{Id: "co_1", Name: "Product lines"},
		},
		{Entity: &baagentv1.Entity{Id: "en_q3", Name: "Q3 revenue", Type: "Metric"}, Score: 0.016},
	}
}

func TestMemoryToolsOfferedByTenantSwitch(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}}
	now := time.Unix(1_780_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f), Now: clock, SettingsTTL: 10 * time.Second})
	ctx := context.Background()
	names := func(ts []tool.Tool) (out []string) {
		for _, t := range ts {
			out = append(out, t.Spec().Name)
		}
		return out
	}
	if got := names(src.TenantTools(ctx, "acme")); strings.Join(got, ",") != "memory_add,memory_search" {
		t.Fatalf("acme offered %v", got)
	}
	if got := src.TenantTools(ctx, "globex"); len(got) != 0 {
		t.Fatalf("globex (tools off) offered %v", names(got))
	}
	if len(src.Tools()) != 0 {
		t.Fatal("tools offered without a tenant")
	}
	// Cached: a second listing asks nothing.
	src.TenantTools(ctx, "acme")
	f.mu.Lock()
	asked := f.settings
	f.enabled["globex"] = true
	f.mu.Unlock()
	if asked != 2 {
		t.Fatalf("settings read %d times, want 2 (one per tenant)", asked)
	}
	tl, ok := src.TenantTool(ctx, "globex", MemorySearchTool)
	if !ok {
		t.Fatal("memory_search unknown to globex")
	}
	_, err := tl.Execute(ctx, tool.Call{Tenant: "globex", Args: map[string]any{"query": "x"}})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != "MEMORY_TOOLS_DISABLED" {
		t.Fatalf("switched-off call: %v", err)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	if got := names(src.TenantTools(ctx, "globex")); len(got) != 2 {
		t.Fatalf("after the TTL globex offered %v", got)
	}
	if _, ok := src.TenantTool(ctx, "acme", "file_read"); ok {
		t.Fatal("the memory source claimed file_read")
	}
}

func TestMemoryToolsHiddenWhileSettingsUnavailable(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}, down: status.Error(codes.Unavailable, "down")}
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f)})
	if got := src.TenantTools(context.Background(), "acme"); len(got) != 0 {
		t.Fatalf("offered %d tools while the memory service is down", len(got))
	}
}

func TestMemorySearchFormatsAndCarriesHits(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}, hits: sampleHits()}
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f)})
	tl, _ := src.TenantTool(context.Background(), "acme", MemorySearchTool)
	res, err := tl.Execute(context.Background(), tool.Call{Tenant: "acme", ConversationID: "c1",
		Args: map[string]any{"query": " Software category ", "search_type": "semantic", "limit": float64(5)}})
	if err != nil {
		t.Fatal(err)
	}
	doc := res.Data.(tool.Document)
	for _, want := range []string{
		`Memory recall for "Software category" (2, best first):`,
		"1. Software [Category] — Licences and subscriptions sold to businesses.",
		"Relations: SOLD_IN → EMEA; SELLS ← Acme Corp.",
		"Community: Product lines.",
		"2. Q3 revenue [Metric]",
	} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, doc.Text)
		}
	}
	if doc.Brief != `Recalled 2 entities for "Software category"` {
		t.Errorf("brief %q", doc.Brief)
	}
	if doc.Recall == nil || len(doc.Recall.Hits) != 2 {
		t.Fatalf("recall %v", doc.Recall)
	}
	h := doc.Recall.Hits[0]
	if h.GetEntity().GetId() != "en_soft" || h.GetEntity().GetName() != "Software" || h.GetEntity().GetType() != "Category" ||
		h.GetScore() != 0.032 || h.GetEntity().GetSummary() != "" || len(h.GetRelations()) != 0 {
		t.Fatalf("hit carried %v; want id, name, type and score only", h)
	}
	f.mu.Lock()
	sr := f.searches[0]
	f.mu.Unlock()
	if sr.GetTenant() != "acme" || sr.GetQuery() != "Software category" || sr.GetMode() != baagentv1.SearchMode_SEARCH_MODE_VECTOR || sr.GetTopK() != 5 {
		t.Fatalf("search request %v", sr)
	}
}

func TestMemorySearchDefaultsAndEmpty(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}}
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f)})
	tl, _ := src.TenantTool(context.Background(), "acme", MemorySearchTool)
	res, err := tl.Execute(context.Background(), tool.Call{Tenant: "acme", Args: map[string]any{"query": "nothing known"}})
	if err != nil {
		t.Fatal(err)
	}
	if doc := res.Data.(tool.Document); doc.Text != `Memory has nothing about "nothing known" yet.` || len(doc.Recall.Hits) != 0 {
		t.Fatalf("empty result %+v", doc)
	}
	f.mu.Lock()
	sr := f.searches[0]
	f.mu.Unlock()
	if sr.GetMode() != baagentv1.SearchMode_SEARCH_MODE_HYBRID || sr.GetTopK() != MemorySearchDefault {
		t.Fatalf("defaults %v", sr)
	}
	for name, args := range map[string]map[string]any{
		"empty":       {"query": "  "},
		"long":        {"query": strings.Repeat("q", MemoryQueryMaxBytes+1)},
		"search_type": {"query": "x", "search_type": "graph"},
	} {
		_, err := tl.Execute(context.Background(), tool.Call{Tenant: "acme", Args: args})
		var te *tool.Error
		if !errors.As(err, &te) || te.Type != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMemoryAddIdempotentPerCall(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}}
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f)})
	tl, _ := src.TenantTool(context.Background(), "acme", MemoryAddTool)
	if tl.Spec().ReadOnly {
		t.Fatal("memory_add is read-only")
	}
	call := tool.Call{ToolCallID: "call_1", Tenant: "acme", ConversationID: "c1", RunID: "run_1", IdempotencyKey: "run_1:s1:c0",
		Args: map[string]any{"content": "Acme's Q3 software revenue was 1.2M EUR."}}
	r1, err := tl.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	call.Attempt = 1 // a retry of the same call
	r2, err := tl.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	other := call
	other.ToolCallID, other.IdempotencyKey = "call_2", "run_1:s2:c0"
	if _, err := tl.Execute(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if r1.Data.(tool.Document).Text != r2.Data.(tool.Document).Text || !strings.Contains(r1.Data.(tool.Document).Text, "1 span(s)") {
		t.Fatalf("retry answered %q then %q", r1.Data.(tool.Document).Text, r2.Data.(tool.Document).Text)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.episodeID) != 2 {
		t.Fatalf("%d distinct episodes, want 2 (the retry adds none)", len(f.episodeID))
	}
	a := f.adds[0]
	if a.GetSource() != baagentv1.EpisodeSource_EPISODE_SOURCE_AGENT || a.GetTenant() != "acme" || a.GetConversationId() != "c1" ||
		a.GetRunId() != "run_1" || len(a.GetIdempotencyKey()) > 128 || a.GetIdempotencyKey() != f.adds[1].GetIdempotencyKey() {
		t.Fatalf("add request %v", a)
	}
	if MemoryAddKey(call) == MemoryAddKey(tool.Call{ToolCallID: "call_1", Tenant: "globex", ConversationID: "c1", RunID: "run_1", IdempotencyKey: "run_1:s1:c0"}) {
		t.Fatal("another tenant's call has the same key")
	}
}

func TestMemoryAddRejectsOversized(t *testing.T) {
	f := &memoryFake{enabled: map[string]bool{"acme": true}}
	src := NewMemorySource(MemoryOptions{Client: memoryClient(t, f)})
	tl, _ := src.TenantTool(context.Background(), "acme", MemoryAddTool)
	_, err := tl.Execute(context.Background(), tool.Call{Tenant: "acme", Args: map[string]any{"content": strings.Repeat("é", MemoryAddMaxBytes/2+1)}})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != "INVALID_CONTENT" {
		t.Fatalf("oversized content: %v", err)
	}
	if len(f.adds) != 0 {
		t.Fatal("oversized content reached the memory service")
	}
}

func TestMemoryErrorsTyped(t *testing.T) {
	for _, c := range []struct {
		code      codes.Code
		want      baagentv1.ToolErrorType
		retryable bool
	}{
		{codes.Unavailable, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR, true},
		{codes.DeadlineExceeded, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_TRANSIENT_ERROR, true},
		{codes.ResourceExhausted, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_RATE_LIMIT, true},
		{codes.InvalidArgument, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_INVALID_PARAMETERS, false},
		{codes.Internal, baagentv1.ToolErrorType_TOOL_ERROR_TYPE_EXECUTION_ERROR, false},
	} {
		f := &memoryFake{enabled: map[string]bool{"acme": true}}
		tl := memorySearch{memoryClient(t, f)}
		f.down = status.Error(c.code, "boom")
		_, err := tl.Execute(context.Background(), tool.Call{Tenant: "acme", Args: map[string]any{"query": "x"}})
		var te *tool.Error
		if !errors.As(err, &te) || te.Type != c.want || tool.Retryable(te.Type) != c.retryable {
			t.Errorf("%v: got %v", c.code, err)
		}
	}
}

func FuzzFormatHits(f *testing.F) {
	f.Add("Software", "Software", "Category", "summary\nline", "SOLD_IN", "EMEA", "Product lines")
	f.Add("", "", "", "", "", "", "")
	f.Add("\xff\xfe", "a\x00b", "é", strings.Repeat("long ", 100), "R", "\u2028", "c")
	f.Fuzz(func(t *testing.T, query, name, typ, summary, rel, other, community string) {
		hits := []*baagentv1.SearchHit{{
			Entity:       &baagentv1.Entity{Id: "en_1", Name: name, Type: typ, Summary: summary},
			Relations:    []*baagentv1.Relation{{SourceId: "en_1", TargetId: "en_2", Type: rel}},
			RelatedNames: map[string]string{"en_2": other},
			Community:    &baagentv1.Community{Name: community},
		}}
		for _, hs := range [][]*baagentv1.SearchHit{nil, hits} {
			out := FormatHits(query, hs)
			if !utf8Valid(out) {
				t.Fatalf("invalid UTF-8: %q", out)
			}
			lines := strings.Split(out, "\n")
			if len(lines) != len(hs)+1 && !(len(hs) == 0 && len(lines) == 1) {
				t.Fatalf("%d lines for %d hits:\n%s", len(lines), len(hs), out)
			}
			// Bounded: names, summaries and relations are cut.
			if len(out) > 4*(200+120+40+200+3*(40+80+8)+80+64) {
				t.Fatalf("line of %d bytes", len(out))
			}
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func BenchmarkFormatHits(b *testing.B) {
	hits := sampleHits()
	for len(hits) < 10 {
		hits = append(hits, sampleHits()...)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = FormatHits("Software category", hits[:10])
	}
}
