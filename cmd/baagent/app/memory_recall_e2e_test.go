package app

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
)

// TestMemoryRecalledEndToEnd: with the whole suite in one process (the
// scripted model, memory on SQLite), a run answered over the gateway is
// captured as an episode, and the scripted "What do we know about the
// Software category?" then calls memory_search, whose recall arrives over
// SSE as a memory_recalled event naming the Software entity and is quoted
// in the answer — what `make run` shows.
func TestMemoryRecalledEndToEnd(t *testing.T) {
	cfg := mustLoad(t, testArgs(t, "-memory-community-interval=0"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := "http://" + startServing(t, ctx, cfg).GatewayHTTPAddr().String()

	if code, body := memHTTP(ctx, t, http.MethodPost, base+"/v1/runs", `{"spec":{"input":"Which product category had the highest revenue last quarter?"}}`); code != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %v", code, body)
	}
	testkit.EventuallyContext(ctx, t, "the run captured as an episode", func() (bool, string) {
		_, body := memHTTP(ctx, t, http.MethodGet, base+"/v1/memory/episodes?status=synced", "")
		eps, _ := body["episodes"].([]any)
		for _, e := range eps {
			if e.(map[string]any)["source"] == "EPISODE_SOURCE_RUN" {
				return true, ""
			}
		}
		return false, "no synced run episode yet"
	})

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs?stream=true",
		strings.NewReader(`{"spec":{"input":"What do we know about the Software category?"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type entity struct {
		EntityID string  `json:"entity_id"`
		Name     string  `json:"name"`
		Type     string  `json:"type"`
		Score    float64 `json:"score"`
	}
	var (
		recalled *struct {
			Query      string   `json:"query"`
			Origin     string   `json:"origin"`
			ToolCallID string   `json:"tool_call_id"`
			Entities   []entity `json:"entities"`
		}
		answer string
		types  []string
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		var ev struct {
			Type           string          `json:"type"`
			MemoryRecalled json.RawMessage `json:"memory_recalled"`
			Complete       *struct {
				Content string `json:"content"`
			} `json:"complete"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &ev); err != nil || ev.Type == "" {
			continue // the first message is the run itself
		}
		types = append(types, ev.Type)
		if ev.Type == "memory_recalled" {
			if err := json.Unmarshal(ev.MemoryRecalled, &recalled); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Complete != nil {
			answer = ev.Complete.Content
		}
		if ev.Type == "complete" || ev.Type == "error" || ev.Type == "cancelled" {
			break
		}
	}
	if recalled == nil {
		t.Fatalf("no memory_recalled event in %v", types)
	}
	software := false
	for _, e := range recalled.Entities {
		software = software || e.Name == "Software" && e.Type == "ProductCategory" && e.EntityID != "" && e.Score > 0
	}
	if recalled.Origin != "tool" || recalled.Query != "Software category" || recalled.ToolCallID == "" || !software {
		t.Fatalf("memory_recalled %+v", recalled)
	}
	if !strings.Contains(answer, "Software [ProductCategory]") {
		t.Fatalf("the answer does not quote memory:\n%s", answer)
	}
}
