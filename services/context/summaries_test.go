package contextsvc

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestSummarizerFailureFallsBack(t *testing.T) {
	t.Parallel()

	fake := newFakeOpenAI(t)
	fake.fail.Store(true)
	e := newEnv(t, Options{Summarizer: fake.summarizer(t), SummarizerModel: "gpt-4o-mini"})
	hist, facts := genConversation(convSpec{rounds: 30, stepsPerRnd: 3, outputWords: 60, plantEvery: 4, skillAtRound: -1}, 9)
	appendAll(t, e.client, "t", "c", hist)
	stored := readAll(t, e.client, "t", "c", 0)
	req := buildReqFor("test-8k", strategySummarize)
	req.Compression.SummaryMaxTokens = proto.Int32(100)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "test-8k", history: stored, facts: facts}.check(t, e, req, resp)
	if !resp.GetSummaryPending() {
		t.Fatal("first window: no summary pending")
	}
	var hdr metadata.MD
	waitFor(t, "summarizer failure", func() bool {
		r, err := e.client.BuildWindow(t.Context(), req, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		resp = r
		return !r.GetSummaryPending()
	})
	windowCheck{model: "test-8k", history: stored, facts: facts}.check(t, e, req, resp)
	if resp.GetStrategy() != strategyExtract {
		t.Fatalf("after a summarizer failure: strategy %v, want EXTRACT", resp.GetStrategy())
	}
	if note := strings.Join(hdr.Get(NoteHeader), ";"); !strings.Contains(note, "summarizer failed") || !strings.Contains(note, "model overloaded") {
		t.Fatalf("note header %q does not say the summarizer failed", note)
	}
}

// TestChunkedSummary: the summarizer model has a 3,000-token window, far
// smaller than the segment to summarize: every prompt it receives fits its
// window, and the partial summaries are merged.
func TestChunkedSummary(t *testing.T) {
	t.Parallel()

	fake := newFakeOpenAI(t)
	e := newEnv(t, Options{Summarizer: fake.summarizer(t)})
	hist, facts := genConversation(convSpec{rounds: 3, stepsPerRnd: 30, outputWords: 120, plantEvery: 1, skillAtRound: -1}, 11)
	appendAll(t, e.client, "t", "c", hist)
	req := buildReqFor("test-8k", strategySummarize)
	req.Compression.SummarizerModel = "tiny-summarizer"
	req.Compression.SummaryMaxTokens = proto.Int32(200)
	var resp *baagentv1.BuildWindowResponse
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("summarizer calls %d, failures cached %d, last strategy %v pending %v", fake.calls.Load(), e.srv.summaries.failed.Len(), resp.GetStrategy(), resp.GetSummaryPending())
		}
	})
	waitFor(t, "chunked summary", func() bool {
		r, err := e.client.BuildWindow(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		resp = r
		return strings.Contains(summaryText(r), "SUMMARY(merge")
	})
	windowCheck{model: "test-8k", history: readAll(t, e.client, "t", "c", 0), facts: facts}.check(t, e, req, resp)
	fake.mu.Lock()
	prompts := append([]string(nil), fake.prompts...)
	fake.mu.Unlock()
	if len(prompts) < 3 {
		t.Fatalf("%d summarizer calls, want chunks and a merge", len(prompts))
	}
	for i, p := range prompts {
		n, err := e.tokens.CountMessages(t.Context(), &baagentv1.CountMessagesRequest{Model: "tiny-summarizer", Messages: []*baagentv1.ChatMessage{
			{Role: roleSystem, Content: summarySystem}, {Role: roleUser, Content: p}}})
		if err != nil {
			t.Fatal(err)
		}
		if n.GetCount()+200 > 3000 {
			t.Errorf("prompt %d has %d tokens: with a 200-token summary it exceeds the 3000-token window", i, n.GetCount())
		}
	}
}
