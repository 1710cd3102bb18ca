package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/extract"
)

// recallOrders is how many orders of the sample data the evaluation
// ingests (one episode each).
const recallOrders = 240

// labelledQuery is a query with the names of the entities a good answer
// contains.
type labelledQuery struct {
	class    string // which channel it is made for: keyword, vector, graph, mixed
	query    string
	relevant []string
}

// inflect changes a word's number as one misremembers a name
// ("Partners" → "Partner", "Harbor" → "Harbors"): the word is no longer an
// exact keyword match but keeps most of its character trigrams.
func inflect(w string) string {
	if strings.HasSuffix(w, "s") {
		return w[:len(w)-1]
	}
	return w + "s"
}

// buildQueries labels queries over the first n orders: each class is
// built from the data by a rule, so the relevant sets are exact.
func (d *sampleData) buildQueries(orders []sampleOrder) []labelledQuery {
	byCustomer := map[int][]sampleOrder{}
	byProduct := map[int][]sampleOrder{}
	byDate := map[string][]sampleOrder{}
	for _, o := range orders {
		byCustomer[o.customer] = append(byCustomer[o.customer], o)
		byProduct[o.product] = append(byProduct[o.product], o)
		byDate[o.date] = append(byDate[o.date], o)
	}
	var qs []labelledQuery
	sortedKeys := func(m map[int][]sampleOrder) []int {
		ks := make([]int, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		return ks
	}
	distinct := func(os []sampleOrder, name func(sampleOrder) string) []string {
		var out []string
		for _, o := range os {
			if n := name(o); !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	productOf := func(o sampleOrder) string { return d.products[o.product].name }
	customerOf := func(o sampleOrder) string { return d.customers[o.customer].name }

	// keyword: exact values held only in attributes — an order date, a
	// customer number.
	dates := make([]string, 0, len(byDate))
	for date := range byDate {
		dates = append(dates, date)
	}
	sort.Strings(dates)
	n := 0
	for _, date := range dates {
		if os := byDate[date]; len(os) >= 2 && len(os) <= 3 && n < 6 {
			qs = append(qs, labelledQuery{"keyword", "orders placed on " + date, distinct(os, func(o sampleOrder) string { return orderName(o.id) })})
			n++
		}
	}
	n = 0
	for _, id := range sortedKeys(byCustomer) {
		if id > 99 && n < 4 {
			qs = append(qs, labelledQuery{"keyword", fmt.Sprintf("customer number %d", id), []string{d.customers[id].name}})
			n++
		}
	}

	// vector: the name of a customer or product with every word inflected.
	n = 0
	for _, id := range sortedKeys(byCustomer) {
		words := strings.Fields(d.customers[id].name)
		if len(words) != 2 || len(words[0]) < 4 || len(words[1]) < 4 || n >= 7 {
			continue
		}
		qs = append(qs, labelledQuery{"vector", inflect(words[0]) + " " + inflect(words[1]), []string{d.customers[id].name}})
		n++
	}
	n = 0
	for _, id := range sortedKeys(byProduct) {
		p := d.products[id].name
		words := strings.Fields(p)
		if len(words) < 2 || len(words[0]) < 4 || len(words[1]) < 4 || n >= 3 {
			continue
		}
		qs = append(qs, labelledQuery{"vector", inflect(words[0]) + " " + inflect(words[1]), []string{p}})
		n++
	}

	// graph: what a customer bought, who bought a product — entities the
	// query does not name, two hops away.
	n = 0
	for _, id := range sortedKeys(byCustomer) {
		if os := byCustomer[id]; len(os) >= 2 && len(os) <= 3 && n < 6 {
			qs = append(qs, labelledQuery{"graph", "What did " + d.customers[id].name + " buy?", distinct(os, productOf)})
			n++
		}
	}
	n = 0
	for _, id := range sortedKeys(byProduct) {
		if os := byProduct[id]; len(os) >= 2 && len(os) <= 4 && n < 4 {
			qs = append(qs, labelledQuery{"graph", "Who bought " + d.products[id].name + "?", distinct(os, customerOf)})
			n++
		}
	}
	if n == 0 {
		// Every product is popular in the subset: ask about one order's
		// product instead.
		for _, id := range sortedKeys(byCustomer)[:4] {
			o := byCustomer[id][0]
			qs = append(qs, labelledQuery{"graph", "Which product is in order " + orderName(o.id) + "?", []string{productOf(o)}})
		}
	}

	// mixed: a customer's purchases of one category — the graph knows what
	// they bought, the words know the category.
	n = 0
	for _, id := range sortedKeys(byCustomer) {
		os := byCustomer[id]
		if len(os) < 3 || n >= 6 {
			continue
		}
		cat := d.products[os[0].product].category
		var rel []string
		for _, o := range os {
			if p := d.products[o.product]; p.category == cat && !slices.Contains(rel, p.name) {
				rel = append(rel, p.name)
			}
		}
		qs = append(qs, labelledQuery{"mixed", fmt.Sprintf("%s products bought by %s", cat, d.customers[id].name), rel})
		n++
	}
	return qs
}

// TestRecallEvaluation ingests the first 240 orders of the sample data
// through the server and measures recall@10 of each search mode over
// labelled queries made for each channel; hybrid retrieval must beat every
// single channel. The figures are in BENCHMARKS.md ("Memory service").
func TestRecallEvaluation(t *testing.T) {
	t.Parallel()
	d := loadSample(t)
	orders := d.orders[:recallOrders]
	x := &tableExtractor{results: map[string]*extract.Result{}}
	var texts []string
	for _, o := range orders {
		text, res := d.episode(o)
		x.results[text] = res
		texts = append(texts, text)
	}
	ts := newTestServer(t, Options{Extractor: x}, true)
	ctx := t.Context()
	for _, text := range texts {
		if _, err := ts.c.AddEpisode(ctx, &baagentv1.AddEpisodeRequest{Tenant: "sample", Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 3*time.Minute, "every episode synced", func() bool {
		st, err := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "sample"})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetEpisodesFailed() > 0 {
			t.Fatalf("failed episodes: %v", st)
		}
		return st.GetEpisodesPending() == 0
	})

	qs := d.buildQueries(orders)
	if len(qs) < 30 {
		t.Fatalf("%d labelled queries, want at least 30", len(qs))
	}
	modes := []baagentv1.SearchMode{
		baagentv1.SearchMode_SEARCH_MODE_HYBRID, baagentv1.SearchMode_SEARCH_MODE_VECTOR,
		baagentv1.SearchMode_SEARCH_MODE_KEYWORD, baagentv1.SearchMode_SEARCH_MODE_GRAPH,
	}
	classes := []string{"keyword", "vector", "graph", "mixed"}
	sum := map[baagentv1.SearchMode]map[string]float64{}
	count := map[string]int{}
	for _, q := range qs {
		count[q.class]++
	}
	for _, mode := range modes {
		sum[mode] = map[string]float64{}
		for _, q := range qs {
			r := recallAt10(ctx, t, ts.c, mode, q)
			sum[mode][q.class] += r
			sum[mode]["all"] += r
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nrecall@10 over %d queries (%d episodes, %d entities)\n", len(qs), len(orders), entityCount(t, ts))
	fmt.Fprintf(&b, "%-8s", "mode")
	for _, c := range classes {
		fmt.Fprintf(&b, " %8s(%d)", c, count[c])
	}
	fmt.Fprintf(&b, " %8s\n", "all")
	mean := func(mode baagentv1.SearchMode) float64 { return sum[mode]["all"] / float64(len(qs)) }
	for _, mode := range modes {
		fmt.Fprintf(&b, "%-8s", modeLabel(mode))
		for _, c := range classes {
			fmt.Fprintf(&b, " %11.3f", sum[mode][c]/float64(count[c]))
		}
		fmt.Fprintf(&b, " %8.3f\n", mean(mode))
	}
	t.Log(b.String())
	hybrid := mean(baagentv1.SearchMode_SEARCH_MODE_HYBRID)
	for _, mode := range modes[1:] {
		if hybrid <= mean(mode) {
			t.Errorf("hybrid recall@10 %.3f does not beat %s %.3f", hybrid, modeLabel(mode), mean(mode))
		}
	}
}

func entityCount(t *testing.T, ts *testServer) int64 {
	st, err := ts.c.Stats(t.Context(), &baagentv1.StatsRequest{Tenant: "sample"})
	if err != nil {
		t.Fatal(err)
	}
	return st.GetEntities()
}

// recallAt10 is the share of q's relevant entities among the top 10.
func recallAt10(ctx context.Context, t *testing.T, c baagentv1.MemoryServiceClient, mode baagentv1.SearchMode, q labelledQuery) float64 {
	t.Helper()
	res, err := c.Search(ctx, &baagentv1.SearchRequest{Tenant: "sample", Query: q.query, Mode: mode, TopK: 10})
	if err != nil {
		t.Fatalf("%s %q: %v", modeLabel(mode), q.query, err)
	}
	found := 0
	names := hitNames(res.GetHits())
	for _, r := range q.relevant {
		if slices.Contains(names, r) {
			found++
		}
	}
	if testing.Verbose() && found < len(q.relevant) {
		t.Logf("%-7s %-7s %q: %d/%d; got %v, want %v", modeLabel(mode), q.class, q.query, found, len(q.relevant), names, q.relevant)
	}
	return float64(found) / float64(len(q.relevant))
}
