package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// memoryShots are the screenshots console_memory.mjs leaves.
var memoryShots = []string{"memory-search.png", "memory-graph.png", "memory-tablet.png"}

// memoryEpisodes are the texts seedMemory remembers through the public API.
// The scripted model extracts the entities of the sample data they name
// (examples/scenarios/memory-extraction.yaml): customers, their segment and
// region, products and their category, so that Acme Labs has neighbours
// (SMB, North) which have neighbours of their own (Blue Retail).
var memoryEpisodes = []string{
	"Browser test: Acme Labs is an SMB customer in the North region. Blue Retail is an SMB customer too.",
	"Browser test: Rack Server S10 and Edge Router R1 are in the Hardware category; Acme Labs bought the Rack Server S10.",
}

// memoryNotes is how many more episodes seedMemory records after those, naming
// nothing the gazetteer knows, so that the episode list has a second page
// (the page shows 20) with the first episodes on it.
const memoryNotes = 20

// seedMemory records the episodes (waiting for their processing) and notes,
// and waits, with a deadline, until a search finds the entities the episodes
// name. It gives the script the id of the first episode (MEMORY_EPISODE).
func seedMemory(ctx context.Context, t *testing.T, s *pagesSuite) []string {
	t.Helper()
	var first string
	for i, text := range memoryEpisodes {
		var got struct {
			Episode struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"episode"`
		}
		memoryCall(ctx, t, s.Base, http.MethodPost, "/v1/memory/episodes",
			map[string]any{"content": text, "wait": true, "idempotency_key": fmt.Sprintf("console-memory-%d", i)}, &got)
		if got.Episode.ID == "" {
			t.Fatalf("POST /v1/memory/episodes gave no episode id")
		}
		t.Logf("episode %s: %s", got.Episode.ID, got.Episode.Status)
		if first == "" {
			first = got.Episode.ID
		}
	}
	for i := range memoryNotes {
		memoryCall(ctx, t, s.Base, http.MethodPost, "/v1/memory/episodes",
			map[string]any{"content": fmt.Sprintf("Browser test note %d.", i+1), "idempotency_key": fmt.Sprintf("console-memory-note-%d", i)}, nil)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var found struct {
			Hits []struct {
				Entity struct {
					Name string `json:"name"`
				} `json:"entity"`
			} `json:"hits"`
		}
		memoryCall(ctx, t, s.Base, http.MethodGet, "/v1/memory/search?top_k=20&q="+url.QueryEscape("Acme Labs Blue Retail"), nil, &found)
		names := map[string]bool{}
		for _, h := range found.Hits {
			names[h.Entity.Name] = true
		}
		if names["Acme Labs"] && names["Blue Retail"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the memory search does not find the seeded entities: %+v", found.Hits)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return []string{"MEMORY_EPISODE=" + first}
}

// memoryCall sends one JSON request to the gateway and decodes a 200 answer
// into out (when not nil); anything else fails the test.
func memoryCall(ctx context.Context, t *testing.T, base, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}
