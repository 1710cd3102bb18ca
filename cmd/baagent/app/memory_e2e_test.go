package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// memHTTP sends one request to the gateway and decodes its JSON answer.
func memHTTP(ctx context.Context, t *testing.T, method, u, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, u, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

// TestMemoryEndToEndOnSQLite and TestMemoryEndToEndOnPostgres run the
// whole suite in one process with the scripted model, memory on the
// default SQLite file or on PostgreSQL: text added through the gateway is
// extracted into entities and found by search, and a run answered over the
// gateway is captured as an episode of its own.
func TestMemoryEndToEndOnSQLite(t *testing.T) {
	memoryEndToEnd(t, "sqlite")
}

func TestMemoryEndToEndOnPostgres(t *testing.T) {
	memoryEndToEnd(t, "postgres", "-memory-postgres-url="+pgtest.NewDatabase(t))
}

func memoryEndToEnd(t *testing.T, backend string, args ...string) {
	cfg := mustLoad(t, testArgs(t, append(args, "-memory-community-interval=0")...))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := "http://" + startServing(t, ctx, cfg).GatewayHTTPAddr().String()

	code, body := memHTTP(ctx, t, http.MethodPost, base+"/v1/memory/episodes",
		`{"content":"The North region had the highest revenue in the orders table.","wait":true}`)
	ep, _ := body["episode"].(map[string]any)
	if code != http.StatusOK || ep["status"] != "EPISODE_STATUS_SYNCED" {
		t.Fatalf("POST /v1/memory/episodes: %d %v", code, body)
	}
	if ids, _ := ep["entity_ids"].([]any); len(ids) == 0 {
		t.Fatalf("the episode names no entities: %v", ep)
	}

	code, body = memHTTP(ctx, t, http.MethodGet, base+"/v1/memory/search?q="+url.QueryEscape("North region revenue"), "")
	hits, _ := body["hits"].([]any)
	found := false
	for _, h := range hits {
		e, _ := h.(map[string]any)["entity"].(map[string]any)
		found = found || e["name"] == "North"
	}
	if code != http.StatusOK || !found || body["embedding_model"] != "lexical-hash-v1" {
		t.Fatalf("search: %d, North not found: %v", code, body)
	}

	code, body = memHTTP(ctx, t, http.MethodGet, base+"/v1/memory/stats", "")
	if got, _ := body["backend"].(string); code != http.StatusOK || !strings.HasPrefix(got, backend) {
		t.Fatalf("stats: %d %v", code, body)
	}

	// A finished run becomes an episode through the capture queue.
	code, body = memHTTP(ctx, t, http.MethodPost, base+"/v1/runs", `{"spec":{"input":"Which product category had the highest revenue last quarter?"}}`)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/runs: %d %v", code, body)
	}
	testkit.EventuallyContext(ctx, t, "the run captured as an episode", func() (bool, string) {
		code, body := memHTTP(ctx, t, http.MethodGet, base+"/v1/memory/episodes?status=synced", "")
		eps, _ := body["episodes"].([]any)
		for _, e := range eps {
			if e.(map[string]any)["source"] == "EPISODE_SOURCE_RUN" {
				return true, ""
			}
		}
		return false, "episodes: " + http.StatusText(code) + " " + strings.Repeat("*", len(eps))
	})
}
