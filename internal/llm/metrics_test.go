package llm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/internal/testkit"
)

// answeringEndpoint answers every chat call with a short streamed answer
// and usage, whatever model it names (as a proxy such as LiteLLM may).
func answeringEndpoint(t *testing.T) *httptest.Server {
	body := strings.Join(sse(chunk(`{"content":"ok"}`, "stop"), usageChunk(3, 1)), "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A client may name any model in its run spec; 1,000 made-up names must not
// add a single series to /metrics (each would be kept forever).
func TestInventedModelNamesAddNoSeries(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	srv := answeringEndpoint(t)
	c, _ := testClient(t, srv, func(c *Config) {
		c.Registerer = reg
		c.Models = map[string]Options{"gpt-4o-mini": {}}
		c.MetricModels = []string{"claude-3-5-sonnet"}
	})
	ctx := context.Background()
	chat := func(model string) {
		t.Helper()
		req := userRequest("q")
		req.Model = model
		if _, err := c.Chat(ctx, req, nil); err != nil {
			t.Fatalf("Chat(%q): %v", model, err)
		}
	}
	// Every configured model, and one unknown one, so that the "other"
	// series exist before counting.
	for _, m := range []string{"", "gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet", "made-up-0"} {
		chat(m)
	}
	before := testkit.SeriesCount(t, reg)
	for i := range 1000 {
		chat(fmt.Sprintf("made-up-%d", i+1))
	}
	if after := testkit.SeriesCount(t, reg); after != before {
		t.Errorf("1,000 invented model names grew the metrics from %d to %d series", before, after)
	}

	for _, m := range []string{"gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet"} {
		want := 1.0
		if m == "gpt-4o" {
			want = 2 // the default model, also named by the empty request
		}
		if got := testutil.ToFloat64(c.metrics.requests.WithLabelValues(m, "ok")); got != want {
			t.Errorf("requests{model=%q} = %v, want %v (configured models are named)", m, got, want)
		}
	}
	if got := testutil.ToFloat64(c.metrics.requests.WithLabelValues("other", "ok")); got != 1001 {
		t.Errorf(`requests{model="other"} = %v, want 1001`, got)
	}
	if got := testutil.ToFloat64(c.metrics.tokensVec.WithLabelValues("other", "prompt")); got != 3003 {
		t.Errorf(`tokens{model="other",direction="prompt"} = %v, want 3003`, got)
	}
}
