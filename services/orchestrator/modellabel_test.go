package orchestrator

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/testkit"
)

// chatEndpoint is an OpenAI-compatible endpoint that answers any model
// (as a LiteLLM proxy might) and records the model names it was asked for.
type chatEndpoint struct {
	mu     sync.Mutex
	models map[string]int
}

func (e *chatEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.models[req.Model]++
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{
		`{"id":"c1","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`,
		`[DONE]`,
	} {
		_, _ = fmt.Fprintf(w, "data: %s\n\n", c)
	}
}

func (e *chatEndpoint) asked(model string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.models[model]
}

// StartRun lets a client name any model. Runs with made-up model names,
// through the real model client, must add no series to the process's
// metrics (the probe grew /metrics from 98 KB to 732 KB with 100 of them).
// The made-up names do reach the endpoint: only the metrics bound them.
func TestInventedModelNamesAddNoMetricSeries(t *testing.T) {
	const runs = 30
	ctx := testCtx(t)
	ep := &chatEndpoint{models: map[string]int{}}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	var reg *prometheus.Registry
	h := newHarness(t, nil, harnessOptions{mutate: func(o *Options) {
		reg = o.Registerer.(*prometheus.Registry)
		client, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: o.DefaultModel, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		o.Model = LLM(client)
	}})
	run := func(model string) {
		t.Helper()
		r := h.start(ctx, &baagentv1.RunSpec{Input: "q", Model: model})
		if got := h.waitRun(ctx, r.GetRunId()); got.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			t.Fatalf("run with model %q: %v %v", model, got.GetState(), got.GetError())
		}
	}
	// The default model and one made-up name first, so that every series
	// a finished run touches exists before counting.
	run("")
	run("made-up-0")
	before := testkit.SeriesCount(t, reg)
	for i := range runs {
		run(fmt.Sprintf("made-up-%d", i+1))
	}
	if after := testkit.SeriesCount(t, reg); after != before {
		t.Errorf("%d runs with made-up model names grew the metrics from %d to %d series", runs, before, after)
	}
	if n, d := ep.asked("made-up-7"), ep.asked(h.opts.DefaultModel); n != 1 || d != 1 {
		t.Errorf("the endpoint was asked %d times for made-up-7 and %d for the default model, want 1 each", n, d)
	}
}
