package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/baagent/baagent/internal/testkit"
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
		s.json(ctx, t, http.MethodPost, "/v1/memory/episodes", "",
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
		s.json(ctx, t, http.MethodPost, "/v1/memory/episodes", "",
			map[string]any{"content": fmt.Sprintf("Browser test note %d.", i+1), "idempotency_key": fmt.Sprintf("console-memory-note-%d", i)}, nil)
	}
	testkit.EventuallyContext(ctx, t, "the memory search to find the seeded entities", func() (bool, string) {
		var found struct {
			Hits []struct {
				Entity struct {
					Name string `json:"name"`
				} `json:"entity"`
			} `json:"hits"`
		}
		s.json(ctx, t, http.MethodGet, "/v1/memory/search?top_k=20&q="+url.QueryEscape("Acme Labs Blue Retail"), "", nil, &found)
		names := map[string]bool{}
		for _, h := range found.Hits {
			names[h.Entity.Name] = true
		}
		return names["Acme Labs"] && names["Blue Retail"], fmt.Sprintf("%v", names)
	})
	return []string{"MEMORY_EPISODE=" + first}
}
