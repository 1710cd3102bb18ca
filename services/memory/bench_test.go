package memory

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store"
)

// benchEntities is the size of the tenant BenchmarkSearch searches.
const benchEntities = 100_000

// populate writes n entities to tenant directly through the store: 100 per
// episode, customers, products and orders named like the sample data,
// each order related to a customer and a product of its episode, with
// lexical embeddings.
func populate(tb testing.TB, st store.Store, tenant string, n int) {
	tb.Helper()
	ctx := context.Background()
	lex := embed.NewLexical(testDims)
	prefixes := []string{"Acme", "Blue", "Cedar", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper",
		"Kestrel", "Lumen", "Maple", "Nova", "Orchid", "Pine", "Quartz", "River", "Summit", "Tide"}
	suffixes := []string{"Labs", "Retail", "Logistics", "Foods", "Partners", "Systems", "Works", "Health", "Energy", "Studios"}
	products := []string{"Edge Router", "Rack Server", "NAS Storage", "Access Point", "Managed Switch", "Thin Client",
		"Analytics Suite", "Backup Manager", "Endpoint Security", "CRM Cloud", "Data Pipeline", "Dashboard Builder"}
	const perEpisode = 100
	for base := 0; base < n; base += perEpisode {
		var r store.IngestResult
		var texts []string
		for i := base; i < min(base+perEpisode, n); i++ {
			var e store.ExtractedEntity
			switch i % 3 {
			case 0:
				e = store.ExtractedEntity{Name: fmt.Sprintf("%s %s %d", prefixes[i%20], suffixes[(i/20)%10], i), Type: "Customer",
					Summary:    fmt.Sprintf("SMB customer in the %s region", []string{"North", "South", "East", "West"}[i%4]),
					Attributes: map[string]string{"customer_id": strconv.Itoa(i)}}
			case 1:
				e = store.ExtractedEntity{Name: fmt.Sprintf("%s %d", products[i%12], i), Type: "Product",
					Summary: "Hardware product listed at 349.00", Attributes: map[string]string{"product_id": strconv.Itoa(i)}}
			default:
				e = store.ExtractedEntity{Name: fmt.Sprintf("ORD-%07d", i), Type: "Order",
					Summary:    fmt.Sprintf("Order of %d units", i%9+1),
					Attributes: map[string]string{"order_date": fmt.Sprintf("2025-%02d-%02d", i%12+1, i%28+1)}}
			}
			texts = append(texts, entityText(e.Name, e.Type, e.Summary))
			r.Entities = append(r.Entities, e)
		}
		vecs, _ := lex.Embed(ctx, texts)
		for i := range r.Entities {
			r.Entities[i].Embedding = vecs[i]
			if i%3 == 2 {
				r.Relations = append(r.Relations,
					store.ExtractedRelation{Source: i - 2, Target: i, Type: "PLACED", Confidence: 0.9},
					store.ExtractedRelation{Source: i, Target: i - 1, Type: "CONTAINS", Confidence: 0.9})
			}
		}
		ep, _, err := st.CreateEpisode(ctx, &store.Episode{ID: newID(episodePrefix, time.Now()), Tenant: tenant,
			Source: store.SourceUser, Content: "bulk", CreatedAt: time.Now(), Status: store.StatusPending})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := st.ClaimEpisodes(ctx, "populate", 1, time.Minute); err != nil {
			tb.Fatal(err)
		}
		if _, err := st.CompleteEpisode(ctx, tenant, ep.ID, "populate", r); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkSearch is a search through the server over gRPC on loopback,
// over a tenant of 100,000 entities on SQLite, in each mode; p50-ns and
// p99-ns are the measured latencies' percentiles.
func BenchmarkSearch(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(testing.TB) store.Store
	}{{"sqlite", openStore}, {"postgres", openPostgres}} {
		b.Run(backend.name, func(b *testing.B) {
			st := backend.open(b)
			start := time.Now()
			populate(b, st, "bench", benchEntities)
			b.Logf("%s: %d entities written in %s", backend.name, benchEntities, time.Since(start))
			// The first search of a tenant loads its vectors; a started
			// server does that in the background (warmVectors), so the
			// measurement starts warm.
			if w, ok := st.(store.VectorWarmer); ok {
				start = time.Now()
				if err := w.WarmVectors(b.Context(), "bench"); err != nil {
					b.Fatal(err)
				}
				b.Logf("%s: vectors loaded in %s", backend.name, time.Since(start))
			}
			ts := newTestServer(b, Options{Store: st}, false)
			queries := []string{"Maple Logistics 300", "What did Acme Labs 3000 buy?", "ORD-0004502", "edge routr", "customers in the North region"}
			for _, mode := range []baagentv1.SearchMode{1, 2, 3, 4} {
				b.Run(modeLabel(mode), func(b *testing.B) {
					var times []time.Duration
					i := 0
					for b.Loop() {
						start := time.Now()
						res, err := ts.c.Search(b.Context(), &baagentv1.SearchRequest{Tenant: "bench", Query: queries[i%len(queries)], Mode: mode})
						times = append(times, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if i == 0 && len(res.GetHits()) == 0 {
							b.Fatalf("no hits for %q", queries[i])
						}
						i++
					}
					testkit.ReportPercentiles(b, times)
				})
			}
		})
	}
}

var orderRef = regexp.MustCompile(`Order (ORD-\d+):`)

// BenchmarkIngest is ingestion throughput without model time: episodes of
// the sample data added through the server, extracted by a table of
// precomputed results, deduplicated, embedded and written by 4 workers.
// One operation is a batch of 40 episodes added and synced; episodes/s is
// their rate.
func BenchmarkIngest(b *testing.B) {
	d := loadSample(b)
	results := map[string]*extract.Result{}
	var texts []string
	for _, o := range d.orders {
		text, res := d.episode(o)
		results[orderName(o.id)] = res
		texts = append(texts, text)
	}
	var mu sync.Mutex
	x := funcExtractor(func(_ context.Context, content string) (*extract.Result, error) {
		m := orderRef.FindStringSubmatch(content)
		mu.Lock()
		defer mu.Unlock()
		if len(m) < 2 || results[m[1]] == nil {
			return &extract.Result{}, nil
		}
		cp := *results[m[1]]
		return &cp, nil
	})
	ts := newTestServer(b, Options{Extractor: x, Workers: 4}, true)
	ctx := b.Context()
	const batch = 40
	n := 0
	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		for range batch {
			content := texts[n%len(texts)]
			if n >= len(texts) {
				content = fmt.Sprintf("[%d] %s", n/len(texts), content)
			}
			if _, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "bench", Content: content}); err != nil {
				b.Fatal(err)
			}
			n++
		}
		testkit.Eventually(b, 5*time.Minute, "the batch synced", func() bool {
			st, err := ts.store.Stats(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			return st.EpisodesPending == 0
		})
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "episodes/s")
}
