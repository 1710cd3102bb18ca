package memory

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baagent/baagent/services/memory/store"
)

// namedEntitiesOneByOne is namedEntities as it was before the batched
// lookup: one FindEntity per phrase. It is the reference the batched one
// must agree with.
func namedEntitiesOneByOne(ctx context.Context, st store.Store, tenant, query string) ([]string, int, error) {
	words := queryWords(query)
	covered := make([]bool, len(words))
	var found []string
	lookups := 0
	for n := min(maxPhraseWords, len(words)); n >= 1; n-- {
		for i := 0; i+n <= len(words); i++ {
			if slices.Contains(covered[i:i+n], true) {
				continue
			}
			if n == 1 && (stopwords[strings.ToLower(words[i])] || len([]rune(words[i])) < 2) {
				continue
			}
			if lookups >= DefaultMaxAnchorLookups {
				return found, lookups, nil
			}
			lookups++
			e, err := st.FindEntity(ctx, tenant, strings.Join(words[i:i+n], " "), "")
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, lookups, err
			}
			for k := i; k < i+n; k++ {
				covered[k] = true
			}
			if !slices.Contains(found, e.ID) {
				found = append(found, e.ID)
			}
		}
	}
	return found, lookups, nil
}

// countingStore counts the batched lookups and checks their size.
type countingStore struct {
	store.Store
	calls    atomic.Int64
	tooLarge atomic.Int64 // calls with more names than lookups are allowed
}

func (c *countingStore) FindEntitiesByNames(ctx context.Context, tenant string, names []string) (map[string]*store.Entity, error) {
	c.calls.Add(1)
	if len(names) > DefaultMaxAnchorLookups {
		c.tooLarge.Add(1)
	}
	return c.Store.FindEntitiesByNames(ctx, tenant, names)
}

// lookupVocab is the words entity names and queries are made of: names
// overlap (one is a prefix or a part of another), so that the
// longest-first covering rule decides.
var lookupVocab = []string{"acme", "corp", "labs", "blue", "river", "north", "data", "pipeline", "ORD-0001",
	"revenue", "mercury", "ünïcode", "a&b"}

// populateLookupGraph writes entities named by 1-4 vocabulary words in
// random case, of three types (so a name may belong to several), with
// aliases and differing mention counts.
func populateLookupGraph(t testing.TB, st store.Store, tenant string, rng *rand.Rand) {
	t.Helper()
	types := []string{"customer", "product", "region"}
	seen := map[string]bool{}
	var r store.IngestResult
	for len(r.Entities) < 60 {
		words := make([]string, 1+rng.IntN(4))
		for i := range words {
			words[i] = randCase(rng, lookupVocab[rng.IntN(len(lookupVocab))])
		}
		name, typ := strings.Join(words, " "), types[rng.IntN(len(types))]
		if seen[typ+"/"+strings.ToLower(name)] {
			continue
		}
		seen[typ+"/"+strings.ToLower(name)] = true
		r.Entities = append(r.Entities, store.ExtractedEntity{Name: name, Type: typ, Embedding: lookupVec(testDims, rng.IntN(testDims))})
	}
	out := completeLookup(t, st, tenant, r)
	// Aliases (some equal to other entities' names) and a second mention
	// for some entities.
	for round := range 3 {
		var m store.IngestResult
		for i, id := range out.EntityIDs {
			if rng.IntN(3) != 0 {
				continue
			}
			name := r.Entities[i].Name
			if round > 0 || rng.IntN(2) == 0 {
				words := make([]string, 1+rng.IntN(3))
				for k := range words {
					words[k] = randCase(rng, lookupVocab[rng.IntN(len(lookupVocab))])
				}
				name = strings.Join(words, " ")
			}
			m.Entities = append(m.Entities, store.ExtractedEntity{MergeInto: id, Name: name, Type: r.Entities[i].Type})
		}
		completeLookup(t, st, tenant, m)
	}
	// Another tenant with the same names: never found.
	var o store.IngestResult
	for _, w := range lookupVocab {
		o.Entities = append(o.Entities, store.ExtractedEntity{Name: w + " other", Type: "customer", Embedding: lookupVec(testDims, 0)})
	}
	o.Entities = append(o.Entities, store.ExtractedEntity{Name: "north", Type: "secret", Embedding: lookupVec(testDims, 0)})
	completeLookup(t, st, "other-"+tenant, o)
}

func completeLookup(t testing.TB, st store.Store, tenant string, r store.IngestResult) store.IngestOutcome {
	t.Helper()
	ctx := t.Context()
	ep, _, err := st.CreateEpisode(ctx, &store.Episode{ID: newID(episodePrefix, time.Now()), Tenant: tenant,
		Source: store.SourceUser, Content: "lookup", CreatedAt: time.Now(), Status: store.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimEpisodes(ctx, "lookup", 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := st.CompleteEpisode(ctx, tenant, ep.ID, "lookup", r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lookupVec(dims, axis int) []float32 {
	v := make([]float32, dims)
	v[axis%dims] = 1
	return v
}

func randCase(rng *rand.Rand, w string) string {
	switch rng.IntN(3) {
	case 0:
		return strings.ToUpper(w)
	case 1:
		return strings.ToLower(w)
	}
	return w
}

// randQuery is a query of 0-maxWords words: vocabulary words in random
// case, stopwords, one-letter words and punctuation around words.
func randQuery(rng *rand.Rand, maxWords int) string {
	extra := []string{"the", "of", "and", "for", "x", "é", "by", "2024"}
	words := make([]string, rng.IntN(maxWords+1))
	for i := range words {
		var w string
		if rng.IntN(4) == 0 {
			w = extra[rng.IntN(len(extra))]
		} else {
			w = randCase(rng, lookupVocab[rng.IntN(len(lookupVocab))])
		}
		switch rng.IntN(8) {
		case 0:
			w += ","
		case 1:
			w = "(" + w + ")"
		case 2:
			w += "?"
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// TestNamedEntitiesBatchedEquivalence compares namedEntities (batched
// lookups) with the one-lookup-per-phrase reference over generated queries
// on a real graph with aliases, overlapping names and names shared by
// several types, on SQLite and (when installed) PostgreSQL. Queries up to
// the lookup bound take one round trip.
func TestNamedEntitiesBatchedEquivalence(t *testing.T) {
	for _, backend := range []struct {
		name    string
		open    func(testing.TB) store.Store
		queries int
	}{{"sqlite", openStore, 250}, {"postgres", openPostgres, 250}} {
		t.Run(backend.name, func(t *testing.T) {
			base := backend.open(t)
			rng := rand.New(rand.NewPCG(28, 1))
			populateLookupGraph(t, base, "lk", rng)
			cs := &countingStore{Store: base}
			ts := newTestServer(t, Options{Store: cs}, false)
			ctx := t.Context()

			queries := []string{"", "the of and", "acme", "ACME corp labs", strings.Repeat("acme corp ", 100),
				strings.Repeat("north ", 300), strings.Repeat("data pipeline revenue ", 80)}
			for range backend.queries {
				max := 14
				if rng.IntN(5) == 0 {
					max = 120 // beyond the lookup bound
				}
				queries = append(queries, randQuery(rng, max))
			}
			matched, multi := 0, 0
			for _, q := range queries {
				want, lookups, err := namedEntitiesOneByOne(ctx, base, "lk", q)
				if err != nil {
					t.Fatal(err)
				}
				before := cs.calls.Load()
				got, err := ts.srv.namedEntities(ctx, "lk", q)
				if err != nil {
					t.Fatal(err)
				}
				calls := cs.calls.Load() - before
				if !slices.Equal(got, want) {
					t.Fatalf("namedEntities(%q) = %v, one by one %v", q, got, want)
				}
				if len(want) > 0 {
					matched++
				}
				switch {
				case lookups == 0 && calls != 0:
					t.Errorf("namedEntities(%q): %d round trips for no lookup", q, calls)
				case lookups > 0 && calls == 0:
					t.Errorf("namedEntities(%q): no round trip for %d lookups", q, lookups)
				case calls > 1:
					multi++
					if phrases := countPhrases(q); phrases <= DefaultMaxAnchorLookups {
						t.Errorf("namedEntities(%q): %d round trips for %d phrases", q, calls, phrases)
					}
				}
			}
			if cs.tooLarge.Load() != 0 {
				t.Errorf("%d lookups asked for more than %d names", cs.tooLarge.Load(), DefaultMaxAnchorLookups)
			}
			// The generated queries must exercise the rule: matches, and
			// batches read after a first one ran out.
			if matched < len(queries)/2 || multi == 0 {
				t.Fatalf("%d of %d queries matched, %d took several round trips: the test exercises too little", matched, len(queries), multi)
			}
			t.Logf("%d queries, %d matched, %d took more than one round trip", len(queries), matched, multi)
		})
	}
}

// countPhrases is how many phrases namedEntities could look up for q
// before covering: every phrase of up to maxPhraseWords words but
// one-word stopwords and one-letter words.
func countPhrases(q string) int {
	words := queryWords(q)
	n := 0
	for l := 1; l <= maxPhraseWords; l++ {
		for i := 0; i+l <= len(words); i++ {
			if l == 1 && (stopwords[strings.ToLower(words[i])] || len([]rune(words[i])) < 2) {
				continue
			}
			n++
		}
	}
	return n
}

// TestNamedEntitiesOneRoundTrip: a goal of a dozen words is one batched
// lookup, whatever it names.
func TestNamedEntitiesOneRoundTrip(t *testing.T) {
	base := openStore(t)
	populate(t, base, "rt", 30)
	cs := &countingStore{Store: base}
	ts := newTestServer(t, Options{Store: cs}, false)
	e, err := base.FindEntity(t.Context(), "rt", "ORD-0000005", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.srv.namedEntities(t.Context(), "rt", "Find duplicate orders like ORD-0000005 placed last quarter in the north region, please")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{e.ID}) {
		t.Fatalf("namedEntities = %v, want [%s]", got, e.ID)
	}
	if n := cs.calls.Load(); n != 1 {
		t.Fatalf("%d round trips, want 1", n)
	}
}

// FuzzNamedEntitiesBatched: for any query text, the batched namedEntities
// finds what the one-lookup-per-phrase reference finds, on a SQLite graph
// of overlapping names and aliases.
func FuzzNamedEntitiesBatched(f *testing.F) {
	st := openStore(f)
	populateLookupGraph(f, st, "fz", rand.New(rand.NewPCG(28, 2)))
	ts := newTestServer(f, Options{Store: st}, false)
	for _, q := range []string{"", "acme corp labs", "What did ACME Corp buy from blue river, north?",
		strings.Repeat("acme corp ", 70), "ünïcode a&b ORD-0001 data pipeline", "the of \x00 \xff"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		want, _, err := namedEntitiesOneByOne(t.Context(), st, "fz", q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ts.srv.namedEntities(t.Context(), "fz", q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("namedEntities(%q) = %v, one by one %v", q, got, want)
		}
	})
}
