package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

func unit(i, d int) []float32 {
	v := make([]float32, d)
	v[i%d] = 1
	return v
}

// claimOne creates an episode and claims it.
func claimOne(t *testing.T, s *Store, tenant, id string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.CreateEpisode(ctx, &store.Episode{ID: id, Tenant: tenant, Source: store.SourceUser, Content: "x", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	eps, err := s.ClaimEpisodes(ctx, "o", 10, time.Minute)
	if err != nil || !slices.ContainsFunc(eps, func(e *store.Episode) bool { return e.ID == id }) {
		t.Fatalf("claim %s: %v %v", id, eps, err)
	}
}

func sample(n int) store.IngestResult {
	var r store.IngestResult
	for i := range n {
		r.Entities = append(r.Entities, store.ExtractedEntity{Name: fmt.Sprintf("Entity %d", i), Type: "thing", Summary: "a walrus of note", Embedding: unit(i, 8)})
		if i > 0 {
			r.Relations = append(r.Relations, store.ExtractedRelation{Source: i - 1, Target: i, Type: "NEXT", Confidence: 0.5})
		}
	}
	return r
}

// TestFailureMidCompleteLeavesNothing breaks CompleteEpisode after its
// entities are written, by an error and by a cancelled context: nothing of
// it may remain, and the episode stays with its owner.
func TestFailureMidCompleteLeavesNothing(t *testing.T) {
	s := openTemp(t)
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	claimOne(t, s, "t", "ep_1")
	// Warm the vector index so that a leaked change would show.
	if _, err := s.VectorSearch(ctx, "t", unit(0, 8), 5, nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	s.testHook = func(context.Context) error { return boom }
	if _, err := s.CompleteEpisode(ctx, "t", "ep_1", "o", sample(5)); !errors.Is(err, boom) {
		t.Fatalf("CompleteEpisode with a failing write: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	s.testHook = func(context.Context) error { cancel(); return nil }
	if _, err := s.CompleteEpisode(cctx, "t", "ep_1", "o", sample(5)); err == nil {
		t.Fatal("CompleteEpisode with a context cancelled mid-transaction succeeded")
	}
	s.testHook = nil
	st, err := s.Stats(ctx, "t")
	if err != nil || st.Entities != 0 || st.Relations != 0 {
		t.Fatalf("stats after failed completions = %+v, %v", st, err)
	}
	if h, _ := s.KeywordSearch(ctx, "t", "walrus", 10, nil); len(h) != 0 {
		t.Fatalf("keyword index kept %v", h)
	}
	if h, _ := s.VectorSearch(ctx, "t", unit(0, 8), 10, nil); len(h) != 0 {
		t.Fatalf("vector index kept %v", h)
	}
	if got, _ := s.TenantsChangedSince(ctx, time.Time{}); len(got) != 0 {
		t.Fatalf("a failed completion marked %v changed", got)
	}
	ep, err := s.GetEpisode(ctx, "t", "ep_1")
	if err != nil || ep.Status != store.StatusProcessing {
		t.Fatalf("episode = %+v, %v", ep, err)
	}
	out, err := s.CompleteEpisode(ctx, "t", "ep_1", "o", sample(5))
	if err != nil || len(out.CreatedIDs) != 5 || len(out.RelationIDs) != 4 {
		t.Fatalf("CompleteEpisode afterwards = %+v, %v", out, err)
	}
	if h, _ := s.VectorSearch(ctx, "t", unit(3, 8), 1, nil); len(h) != 1 || h[0].ID != out.EntityIDs[3] {
		t.Fatalf("vector search after the good completion = %v", h)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	claimOne(t, s, "t", "ep_1")
	out, err := s.CompleteEpisode(ctx, "t", "ep_1", "o", sample(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutSettings(ctx, "t", store.Settings{ToolsEnabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceCommunities(ctx, "t", []*store.Community{{ID: "co_1", Name: "all", MemberIDs: out.EntityIDs}}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Stats(ctx, "t")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s.Close() }()
	after, err := s.Stats(ctx, "t")
	if err != nil || after != before {
		t.Fatalf("stats after reopening = %+v, %v; want %+v", after, err, before)
	}
	e, err := s.GetEntity(ctx, "t", out.EntityIDs[1])
	if err != nil || e.Name != "Entity 1" || e.CommunityID != "co_1" || len(e.Embedding) != 8 {
		t.Fatalf("entity after reopening = %+v, %v", e, err)
	}
	if h, _ := s.KeywordSearch(ctx, "t", "walrus", 10, nil); len(h) != 3 {
		t.Fatalf("keyword search after reopening = %v", h)
	}
	if h, _ := s.VectorSearch(ctx, "t", unit(2, 8), 1, nil); len(h) != 1 || h[0].ID != out.EntityIDs[2] {
		t.Fatalf("vector search after reopening = %v", h)
	}
	if h, _ := s.Traverse(ctx, "t", []string{out.EntityIDs[0]}, 2, 10); len(h) != 2 {
		t.Fatalf("traverse after reopening = %v", h)
	}
	if set, _ := s.GetSettings(ctx, "t"); set.CaptureRuns || !set.ToolsEnabled {
		t.Fatalf("settings after reopening = %+v", set)
	}
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v", v, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if s, err := Open(ctx, path, Options{}); err == nil {
		_ = s.Close()
		t.Fatal("a database of a newer schema was opened")
	}
}

// TestTwoStoresShareOneFile: a second store on the same file (another
// process, or a replica) sees the first's writes at its next search, also
// when it fell behind the removals kept.
func TestTwoStoresShareOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a, err := Open(ctx, path, Options{MaxTombstones: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b, err := Open(ctx, path, Options{MaxTombstones: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	claimOne(t, a, "t", "ep_1")
	out, err := a.CompleteEpisode(ctx, "t", "ep_1", "o", sample(8))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := b.VectorSearch(ctx, "t", unit(4, 8), 1, nil); err != nil || len(h) != 1 || h[0].ID != out.EntityIDs[4] {
		t.Fatalf("b's search of a's write = %v, %v", h, err)
	}
	if _, err := a.DeleteEntity(ctx, "t", out.EntityIDs[4]); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.VectorSearch(ctx, "t", unit(4, 8), 1, nil); len(h) != 1 || h[0].ID == out.EntityIDs[4] {
		t.Fatalf("b still finds a deleted entity: %v", h)
	}
	// Five more removals: b's index is behind the two tombstones kept.
	for _, i := range []int{0, 1, 2, 3, 5} {
		if _, err := a.DeleteEntity(ctx, "t", out.EntityIDs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := a.r.QueryRowContext(ctx, `SELECT count(*) FROM vector_tombstones`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("tombstones kept = %d, %v; want 2", n, err)
	}
	h, err := b.VectorSearch(ctx, "t", unit(0, 8), 10, nil)
	if err != nil || len(h) != 2 {
		t.Fatalf("b after pruned removals = %v, %v; want the 2 left", h, err)
	}
	for _, x := range h {
		if x.ID != out.EntityIDs[6] && x.ID != out.EntityIDs[7] {
			t.Fatalf("b finds removed %s", x.ID)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(context.Background(), "", Options{}); err == nil {
		t.Fatal("empty path accepted")
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "x", "m.db"), Options{}); err == nil {
		t.Fatal("a path in a missing directory was opened")
	}
}

// FuzzFTSQuery: any text makes queries FTS5 accepts.
func FuzzFTSQuery(f *testing.F) {
	for _, s := range []string{`acme "corp"`, `NEAR(a b)`, `a AND OR NOT`, `{name}:x`, `x*`, "\x00", `ö日本`, `-"`, `'`} {
		f.Add(s)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE x USING fts5(tk, name, body, tokenize = 'unicode61 remove_diacritics 2');
		INSERT INTO x VALUES ('tabc', 'acme corp', 'sells widgets')`); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, term := range ftsTerms(text) {
			q := termMatch("tabc", term)
			rows, err := db.Query(`SELECT rowid FROM x WHERE x MATCH ?`, q)
			if err != nil {
				t.Fatalf("text %q, query %q: %v", text, q, err)
			}
			for rows.Next() {
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("text %q, query %q: %v", text, q, err)
			}
			_ = rows.Close()
		}
	})
}

// FuzzDecodeCursor: any page token is decoded or refused, never a panic,
// and what is decoded encodes back.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(cursor{K: "alpha", I: "en_1"}))
	f.Add(encodeCursor(cursor{N: 12, I: "ep_1"}))
	f.Add("!!")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := decodeCursor(tok)
		if err != nil || c == nil {
			return
		}
		d, err := decodeCursor(encodeCursor(*c))
		if err != nil || *d != *c {
			t.Fatalf("round trip of %+v = %+v, %v", c, d, err)
		}
	})
}

// TestKeywordRankBudget: past the ranking budget the candidates are chosen
// by the words' rarity, and bm25 still orders the best.
func TestKeywordRankBudget(t *testing.T) {
	s := openTemp(t)
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	old := rankBudget
	rankBudget = 3
	defer func() { rankBudget = old }()
	var r store.IngestResult
	for i := range 12 {
		typ := "common"
		if i == 7 {
			typ = "special"
		}
		r.Entities = append(r.Entities, store.ExtractedEntity{Name: fmt.Sprintf("Harbor %d", i), Type: typ, Summary: "a harbor crane", Embedding: unit(i, 8)})
	}
	r.Entities = append(r.Entities, store.ExtractedEntity{Name: "Harbor Walrus", Type: "common", Summary: "the walrus of the harbor crane", Embedding: unit(3, 8)})
	claimOne(t, s, "t", "ep_1")
	out, err := s.CompleteEpisode(ctx, "t", "ep_1", "o", r)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.KeywordSearch(ctx, "t", "harbor walrus crane", 5, nil)
	if err != nil || len(h) != 5 || h[0].ID != out.EntityIDs[12] {
		t.Fatalf("KeywordSearch past the budget = %v, %v; want %s first", h, err, out.EntityIDs[12])
	}
	// A type filter the candidates miss falls back to every match.
	h, err = s.KeywordSearch(ctx, "t", "harbor walrus crane", 5, []string{"special"})
	if err != nil || len(h) != 1 || h[0].ID != out.EntityIDs[7] {
		t.Fatalf("KeywordSearch(type special) past the budget = %v, %v", h, err)
	}
}

// WarmVectors loads a tenant's vectors ahead of its first search, and only
// that tenant's.
func TestWarmVectorsLoadsTheTenant(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	claimOne(t, s, "t", "ep_1")
	if _, err := s.CompleteEpisode(ctx, "t", "ep_1", "o", sample(3)); err != nil {
		t.Fatal(err)
	}
	if n := s.idx.Stats().Tenants; n != 0 {
		t.Fatalf("%d tenants indexed before any search", n)
	}
	var w store.VectorWarmer = s
	if err := w.WarmVectors(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if n := s.idx.Stats().Tenants; n != 1 {
		t.Fatalf("%d tenants indexed after warming one", n)
	}
	if h, err := s.VectorSearch(ctx, "t", unit(1, 8), 1, nil); err != nil || len(h) != 1 {
		t.Fatalf("search after warming = %v, %v", h, err)
	}
}

// A deleted episode's text is gone from the files, not only from the
// tables: freed pages are zeroed and the log is checkpointed.
func TestDeletedContentLeavesTheFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "m.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const marker = "conv_marker_7f3a9c"
	for i, conv := range []string{marker, "conv_other"} {
		ep := &store.Episode{ID: fmt.Sprintf("ep_%d", i), Tenant: "t", Source: store.SourceRun, ConversationID: conv,
			Content: "Question about " + conv + strings.Repeat(" padding", 200), CreatedAt: time.Now()}
		if _, _, err := s.CreateEpisode(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	holding := func() []string {
		var out []string
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(marker)) {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if len(holding()) == 0 {
		t.Fatal("the marker is in no file before the delete")
	}
	if out, err := s.DeleteConversation(ctx, "t", marker); err != nil || out.Episodes != 1 {
		t.Fatalf("delete: %+v, %v", out, err)
	}
	if files := holding(); len(files) != 0 {
		t.Fatalf("files still holding the deleted conversation: %v", files)
	}
	if _, err := s.GetEpisode(ctx, "t", "ep_1"); err != nil {
		t.Fatalf("the other conversation's episode: %v", err)
	}
}
