package contextsvc

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestSummarizeWithoutSummarizer(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	hist, _ := genConversation(convSpec{rounds: 30, stepsPerRnd: 3, outputWords: 60, skillAtRound: -1}, 10)
	appendAll(t, e.client, "t", "c", hist)
	var hdr metadata.MD
	resp, err := e.client.BuildWindow(t.Context(), buildReqFor("test-8k", strategySummarize), grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStrategy() != strategyExtract || resp.GetSummaryPending() || len(hdr.Get(NoteHeader)) == 0 {
		t.Fatalf("strategy %v pending %v note %v", resp.GetStrategy(), resp.GetSummaryPending(), hdr.Get(NoteHeader))
	}
}

// TestAutoStrategySelection: EXTRACT below 30 messages;
// from the LLM threshold (50) on, SUMMARIZE when its estimated cost is under
// the hourly cap; EXTRACT otherwise.
func TestAutoStrategySelection(t *testing.T) {
	t.Parallel()

	fake := newFakeOpenAI(t)
	e := newEnv(t, Options{Summarizer: fake.summarizer(t), SummarizerModel: "gpt-4o-mini"})
	for _, tc := range []struct {
		name   string
		spec   convSpec
		capUSD *float64
		want   baagentv1.CompressionStrategy
	}{
		{"few messages", convSpec{rounds: 2, stepsPerRnd: 5, outputWords: 500, skillAtRound: -1}, nil, strategyExtract},
		{"many messages, cheap", convSpec{rounds: 12, stepsPerRnd: 3, outputWords: 120, skillAtRound: -1}, nil, strategySummarize},
		{"many messages, over the cap", convSpec{rounds: 12, stepsPerRnd: 3, outputWords: 120, skillAtRound: -1}, proto.Float64(0.001), strategyExtract},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := strings.ReplaceAll(tc.name, " ", "-")
			conv = strings.ReplaceAll(conv, ",", "")
			hist, _ := genConversation(tc.spec, 5)
			appendAll(t, e.client, "t", conv, hist)
			req := buildReqFor("test-8k", strategyAuto)
			req.ConversationId = conv
			req.Compression.MaxCompressionCostPerHour = tc.capUSD
			req.Compression.SummaryMaxTokens = proto.Int32(100)
			resp, err := e.client.BuildWindow(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			windowCheck{model: "test-8k", history: readAll(t, e.client, "t", conv, 0)}.check(t, e, req, resp)
			if resp.GetStrategy() != tc.want {
				t.Fatalf("%d messages: strategy %v, want %v", len(hist), resp.GetStrategy(), tc.want)
			}
		})
	}
}
