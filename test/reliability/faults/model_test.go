package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/grpcclient"
	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/services/orchestrator"
	"github.com/baagent/baagent/test/reliability/harness"
)

// badModel is an OpenAI-compatible endpoint that misbehaves as the user
// message asks ("mode=429" …) and counts the attempts of each mode.
type badModel struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (m *badModel) count(mode string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.attempts[mode]
}

func (m *badModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	mode := ""
	for _, msg := range req.Messages {
		if s, ok := msg.Content.(string); ok && msg.Role == "user" {
			if _, after, ok := strings.Cut(s, "mode="); ok {
				mode = strings.Fields(after)[0]
			}
		}
	}
	m.mu.Lock()
	m.attempts[mode]++
	n := m.attempts[mode]
	m.mu.Unlock()
	switch mode {
	case "429":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}`)
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"internal error","type":"server_error"}}`)
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "x", "choices": [ {"delta": nul`)
	case "broken":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"id\":\"x\",\"choi")
		// The connection ends mid-event.
	case "hang":
		<-r.Context().Done()
	case "flaky":
		if n < 3 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		writeAnswer(w, "recovered after two failures")
	default:
		writeAnswer(w, "fine")
	}
}

// writeAnswer streams a final answer in the chat-completions chunk format.
func writeAnswer(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
	}
	content, _ := json.Marshal(text)
	chunk(`{"role":"assistant","content":`+string(content)+`}`, "")
	chunk(`{}`, "stop")
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// Scenario e: a model endpoint that answers 429, 500, invalid JSON, a
// broken SSE stream, or nothing at all. The orchestrator (in this process,
// with the model client's per-attempt timeouts shortened so a hang is
// detected in a second; the rest of the suite as processes) retries a
// bounded number of times, then the run ends with a clear `error` event;
// no run stays RUNNING. A flaky endpoint (two 500s, then an answer) is
// retried to success.
func TestModelEndpointFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	model := &badModel{attempts: map[string]int{}}
	srv := httptest.NewServer(model)
	defer srv.Close()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, harness.ClusterOptions{
		Services: []string{"tokens", "skills", "context", "toolrunner", "gateway"},
		External: map[string]string{"orchestrator": lis.Addr().String()},
	})
	const attempts = 3
	client, err := llm.New(llm.Config{
		BaseURL: srv.URL + "/v1", Model: "gpt-4o",
		FirstByteTimeout: time.Second, IdleTimeout: time.Second,
		Retry: llm.RetryPolicy{MaxAttempts: attempts, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsx.Connect(ctx, c.NATSURL(), "fault-orchestrator", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(svc string) *grpc.ClientConn {
		conn, err := grpcclient.Dial(c.Addr[svc], grpcclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	orch := orchestrator.New(orchestrator.Options{
		Logger:       slog.New(slog.DiscardHandler),
		JetStream:    js,
		Context:      baagentv1.NewContextServiceClient(dial("context")),
		Skills:       baagentv1.NewSkillsServiceClient(dial("skills")),
		ToolRunner:   baagentv1.NewToolRunnerServiceClient(dial("toolrunner")),
		Tokens:       baagentv1.NewTokensServiceClient(dial("tokens")),
		Model:        orchestrator.LLM(client),
		DefaultModel: "gpt-4o",
	})
	gs := grpc.NewServer()
	orch.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { _ = orch.Run(runCtx); close(runDone) }()
	defer func() { stopRun(); <-runDone; gs.Stop() }()

	g := newGatewayClient(t, c)
	cases := []struct {
		mode     string
		complete string // the answer, when the run must complete
		attempts int
	}{
		{mode: "429", attempts: attempts},
		{mode: "500", attempts: attempts},
		{mode: "garbage"},
		{mode: "broken"},
		{mode: "hang", attempts: attempts},
		{mode: "flaky", complete: "recovered after two failures", attempts: 3},
	}
	ids := make([]string, len(cases))
	began := time.Now()
	for i, tc := range cases {
		ids[i] = g.startRun(ctx, t, "mode="+tc.mode+" please answer")
	}
	for i, tc := range cases {
		rec := &recorder{}
		if err := g.followGRPC(ctx, ids[i], rec); err != nil {
			t.Fatal(err)
		}
		evs := rec.snapshot()
		checkStream(t, tc.mode, evs)
		last := terminal(evs)
		run := g.waitFinished(ctx, t, ids[i])
		n := model.count(tc.mode)
		t.Logf("%s: %s after %d attempts, %s: %s %s", tc.mode, run.GetState(), n, time.Since(began).Round(time.Millisecond), last.GetError().GetCode(), last.GetError().GetMessage())
		if tc.complete != "" {
			if last.GetType() != "complete" || last.GetComplete().GetContent() != tc.complete {
				t.Errorf("%s: ended %s %q %s", tc.mode, last.GetType(), last.GetComplete().GetContent(), last.GetError().GetMessage())
			}
		} else {
			if last.GetType() != "error" || !strings.HasPrefix(last.GetError().GetCode(), "MODEL_") || last.GetError().GetMessage() == "" {
				t.Errorf("%s: ended %s %s %q, want a MODEL_* error", tc.mode, last.GetType(), last.GetError().GetCode(), last.GetError().GetMessage())
			}
			if run.GetState() != baagentv1.RunState_RUN_STATE_FAILED {
				t.Errorf("%s: run state %s", tc.mode, run.GetState())
			}
		}
		if n < 1 || n > attempts || (tc.attempts > 0 && n != tc.attempts) {
			t.Errorf("%s: %d attempts (policy: at most %d, want %d)", tc.mode, n, attempts, tc.attempts)
		}
	}
}
