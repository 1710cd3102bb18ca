package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// FuzzKeywordSearchDB sends arbitrary text to a real PostgreSQL as a
// keyword query: it must never fail, and must never find another tenant's
// entity.
func FuzzKeywordSearchDB(f *testing.F) {
	for _, s := range []string{"acme", `"`, `'; DROP TABLE memory_entities; --`, "a & b | !c", "x:*", "acme-widgets", "\x00", "\xff\xfe", "日本語", "<-> <2>", `\`, "or OR and"} {
		f.Add(s)
	}
	s, _ := openTest(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	f.Cleanup(cancel)
	ep := addEpisode(f, s, "mine", "")
	ingest(f, s, ep, store.IngestResult{Entities: []store.ExtractedEntity{{Name: "Acme Widgets", Type: "org", Summary: "sells widgets and gadgets"}}})
	other := addEpisode(f, s, "theirs", "")
	out := ingest(f, s, other, store.IngestResult{Entities: []store.ExtractedEntity{{Name: "Secret Widgets", Type: "org", Summary: "acme rival"}}})
	f.Fuzz(func(t *testing.T, q string) {
		hits, err := s.KeywordSearch(ctx, "mine", q, 10, nil)
		if err != nil {
			t.Fatalf("KeywordSearch(%q): %v", q, err)
		}
		for _, h := range hits {
			if h.ID == out.EntityIDs[0] {
				t.Fatalf("KeywordSearch(%q) found the other tenant's entity", q)
			}
			if h.Score <= 0 {
				t.Fatalf("KeywordSearch(%q) scored %v", q, h.Score)
			}
		}
	})
}
