package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/grpcserver"
)

// serveWithLimit serves srv as the suite does (grpcserver, grpcclient) with
// maxMsg as the message limit of both ends; 0 keeps their defaults.
func serveWithLimit(t *testing.T, srv *Server, maxMsg int) baagentv1.OrchestratorServiceClient {
	t.Helper()
	gs := grpcserver.New(grpcserver.Options{Name: "orchestrator-test", Addr: "127.0.0.1:0", MaxRecvMsgBytes: maxMsg, MaxSendMsgBytes: maxMsg})
	srv.Register(gs.GRPC())
	if err := gs.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ctx) }()
	conn, err := grpcclient.Dial(gs.Addr().String(), grpcclient.Options{MaxMsgBytes: maxMsg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return baagentv1.NewOrchestratorServiceClient(conn)
}

// listAll pages through the tenant's runs with the default page size and
// returns the pages; every page must stay within budget bytes.
func listAll(ctx context.Context, t *testing.T, c baagentv1.OrchestratorServiceClient, budget int) [][]*baagentv1.Run {
	t.Helper()
	var pages [][]*baagentv1.Run
	tok := ""
	for {
		resp, err := c.ListRuns(ctx, &baagentv1.OrchestratorServiceListRunsRequest{Tenant: testTenant, PageToken: tok})
		if err != nil {
			t.Fatalf("ListRuns page %d: %v", len(pages)+1, err)
		}
		if n := proto.Size(resp); n > budget {
			t.Errorf("page %d is %d bytes, over the %d-byte budget", len(pages)+1, n, budget)
		}
		pages = append(pages, resp.GetRuns())
		if tok = resp.GetNextPageToken(); tok == "" {
			return pages
		}
		if len(resp.GetRuns()) == 0 {
			t.Fatalf("page %d is empty but has a next page token", len(pages))
		}
		if len(pages) > 100 {
			t.Fatal("listing does not end")
		}
	}
}

// seenOnce checks that pages list exactly the runs want, each once, newest
// (greatest id) first. Runs started in the same millisecond order by the
// random part of their ids, so want's own order is not compared.
func seenOnce(t *testing.T, pages [][]*baagentv1.Run, want []string) {
	t.Helper()
	var got []string
	for _, p := range pages {
		for _, r := range p {
			got = append(got, r.GetRunId())
		}
	}
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	if !slices.Equal(got, sorted) {
		t.Errorf("listed %d runs\n got %v\nwant %v", len(got), got, sorted)
	}
}

// Twenty runs with 1 MB inputs (a run's input may be up to 1 MiB; the run
// record must also fit in one NATS message, 1 MiB) took the default page
// over the 16 MiB gRPC limit: ListRuns failed with "trying to send message
// larger than max", which the gateway turned into a 429. The listing must
// come through, with every run exactly once, over real gRPC with the
// suite's default limits; GetRun still returns the whole input.
func TestListRunsOfLargeRunsFitsTheMessageLimit(t *testing.T) {
	const runs, inputBytes, answerBytes = 20, 1_000_000, 20_000
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		return answer(strings.Repeat("é", answerBytes/2)), nil
	}, harnessOptions{})
	client := serveWithLimit(t, h.srv, 0)

	var want []string
	for i := range runs {
		input := fmt.Sprintf("question %02d ", i) + strings.Repeat("x", inputBytes-12)
		resp, err := client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: input}})
		if err != nil {
			t.Fatalf("StartRun %d: %v", i, err)
		}
		want = append([]string{resp.GetRun().GetRunId()}, want...) // newest first
	}
	for _, id := range want {
		if r := h.waitRun(ctx, id); r.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			t.Fatalf("run %s ended %v", id, r.GetState())
		}
	}
	ensureDistinctIDs(t, want)

	pages := listAll(ctx, t, client, listPageBudget(grpcserver.DefaultMaxMsgBytes))
	seenOnce(t, pages, want)
	for _, p := range pages {
		for _, r := range p {
			if !strings.HasPrefix(r.GetInput(), "question ") || !strings.HasSuffix(r.GetInput(), TruncatedMarker) || len(r.GetInput()) > listPreviewBytes+len(TruncatedMarker) {
				t.Errorf("run %s: input preview of %d bytes %.40q…, want at most %d bytes ending %q", r.GetRunId(), len(r.GetInput()), r.GetInput(), listPreviewBytes, TruncatedMarker)
			}
			if a := r.GetFinalAnswer(); !strings.HasPrefix(a, "éé") || !strings.HasSuffix(a, TruncatedMarker) || len(a) > listPreviewBytes+len(TruncatedMarker) {
				t.Errorf("run %s: answer preview of %d bytes", r.GetRunId(), len(a))
			}
		}
	}
	got, err := client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: want[0]})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetRun().GetInput()); n != inputBytes || len(got.GetRun().GetFinalAnswer()) != answerBytes {
		t.Errorf("GetRun: input of %d bytes, answer of %d; want the whole %d and %d", n, len(got.GetRun().GetFinalAnswer()), inputBytes, answerBytes)
	}
}

// ensureDistinctIDs guards the test's own premise.
func ensureDistinctIDs(t *testing.T, ids []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("run id %s twice", id)
		}
		seen[id] = true
	}
}

// bigLabels are the most labels a run spec may carry, each as large as
// allowed (about 25 KB in all): what the byte budget must page by even
// though every text is a preview.
func bigLabels(i int) map[string]string {
	l := map[string]string{}
	for k := range 64 {
		l[fmt.Sprintf("k%03d-%s", k, strings.Repeat("k", 123))] = fmt.Sprintf("run %d ", i) + strings.Repeat("v", 240)
	}
	return l
}

// putRuns stores n finished runs with bigLabels directly in the run store
// and returns their ids, newest first.
func putRuns(ctx context.Context, t *testing.T, h *harness, n int, input string) []string {
	t.Helper()
	store, err := h.srv.runStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	var ids []string
	for i := range n {
		// Ids order by millisecond: one millisecond apart, in order.
		id := newRunID(base.Add(time.Duration(i) * time.Millisecond))
		rec := &baagentv1.Run{RunId: id, ConversationId: "conv_big", Tenant: testTenant, State: baagentv1.RunState_RUN_STATE_COMPLETED,
			Model: "gpt-4o", Input: input, FinalAnswer: "answer", Labels: bigLabels(i),
			Metrics: &baagentv1.ConversationMetrics{LlmCalls: 1, ToolCalls: []*baagentv1.ToolMetrics{{ToolName: "sql_query", Success: true}}}}
		if err := store.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		ids = append([]string{id}, ids...)
	}
	return ids
}

// Under a smaller -max-msg-bytes, summaries that are small one by one
// still add up: the page must end at the byte budget, not at page_size, and
// the token must continue exactly after the last run listed.
func TestListRunsEndsAPageAtTheByteBudget(t *testing.T) {
	const maxMsg = 96 << 10
	ctx := testCtx(t)
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
		t.Error("no run executes in this test")
		return nil, nil
	}, harnessOptions{mutate: func(o *Options) { o.MaxMsgBytes = maxMsg }})
	client := serveWithLimit(t, h.srv, maxMsg)
	want := putRuns(ctx, t, h, 12, "what sold best?")

	pages := listAll(ctx, t, client, listPageBudget(maxMsg))
	seenOnce(t, pages, want)
	if len(pages) < 3 {
		t.Errorf("%d pages for 12 runs of about 25 KB under a %d-byte limit", len(pages), maxMsg)
	}
	for _, p := range pages {
		for _, r := range p {
			if len(r.GetLabels()) != 64 || r.GetInput() != "what sold best?" || r.GetMetrics().GetLlmCalls() != 1 || len(r.GetMetrics().GetToolCalls()) != 0 {
				t.Errorf("summary of %s: %d labels, input %q, metrics %v", r.GetRunId(), len(r.GetLabels()), r.GetInput(), r.GetMetrics())
			}
		}
	}
}

// A run whose summary alone exceeds the budget is listed shrunk (marked
// texts, no labels) rather than failing the listing; GetRun still has it
// whole.
func TestListRunsShrinksARunTooLargeForAPage(t *testing.T) {
	const maxMsg = 8 << 10
	ctx := testCtx(t)
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
		t.Error("no run executes in this test")
		return nil, nil
	}, harnessOptions{mutate: func(o *Options) { o.MaxMsgBytes = maxMsg }})
	client := serveWithLimit(t, h.srv, maxMsg)
	input := strings.Repeat("long question ", 1000)
	want := putRuns(ctx, t, h, 3, input)

	pages := listAll(ctx, t, client, listPageBudget(maxMsg))
	seenOnce(t, pages, want)
	for _, p := range pages {
		for _, r := range p {
			if r.GetInput() != TruncatedMarker || len(r.GetLabels()) != 0 || r.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || r.GetModel() != "gpt-4o" {
				t.Errorf("shrunk summary %v", r)
			}
		}
	}
	// The record is larger than this server may send; read it in process.
	got, err := h.srv.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: want[0]})
	if err != nil || got.GetRun().GetInput() != input || len(got.GetRun().GetLabels()) != 64 {
		t.Errorf("GetRun: %d-byte input, %d labels, %v", len(got.GetRun().GetInput()), len(got.GetRun().GetLabels()), err)
	}
}

func TestPreview(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven cha" + TruncatedMarker},
		{"aé", 2, "a" + TruncatedMarker}, // é is two bytes: cut before it, not in it
		{"anything", 0, TruncatedMarker},
		{"", 0, ""},
	} {
		if got := preview(c.in, c.n); got != c.want {
			t.Errorf("preview(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
