package memory

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/memory/community"
	"github.com/baagent/baagent/services/memory/extract"
)

// countingSummarizer names a community after its first member and counts
// its calls.
type countingSummarizer struct {
	calls  atomic.Int32
	tokens int
}

func (c *countingSummarizer) Summarize(_ context.Context, ms []community.Member, facts []string) (community.Summary, error) {
	c.calls.Add(1)
	return community.Summary{Name: "Around " + ms[0].Name, Summary: strings.Join(facts, " "), Tokens: c.tokens}, nil
}

// clusters is two groups of four entities, densely related within and
// not between.
func clusters() *tableExtractor {
	group := func(names ...string) *extract.Result {
		r := &extract.Result{}
		for _, n := range names {
			r.Entities = append(r.Entities, ent(n, "Thing", "member of a group"))
		}
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				r.Relations = append(r.Relations, rel(names[i], "WORKS_WITH", names[j], names[i]+" works with "+names[j]))
			}
		}
		return r
	}
	return &tableExtractor{results: map[string]*extract.Result{
		"red":  group("Ruby", "Rose", "Rust", "Robin"),
		"blue": group("Azure", "Cobalt", "Navy", "Teal"),
	}}
}

// TestCommunitiesInTheBackground checks that the updater groups a changed
// tenant's entities, has the two communities summarised, keeps the
// summaries of unchanged communities on later passes, and stays within the
// token budget.
func TestCommunitiesInTheBackground(t *testing.T) {
	t.Parallel()
	sum := &countingSummarizer{}
	ts := newTestServer(t, Options{Extractor: clusters(), Summarizer: sum, CommunityInterval: 20 * time.Millisecond}, true)
	ctx := t.Context()
	ts.add(t, "t", "red")
	ts.add(t, "t", "blue")
	testkit.Eventually(t, 30*time.Second, "two summarised communities", func() bool {
		st, err := ts.c.Stats(ctx, &baagentv1.StatsRequest{Tenant: "t"})
		return err == nil && st.GetCommunities() == 2 && sum.calls.Load() >= 2
	})
	ruby := findEntity(t, ts, "t", "Ruby")
	ge, err := ts.c.GetEntity(ctx, &baagentv1.GetEntityRequest{Tenant: "t", Id: ruby.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if c := ge.GetCommunity(); c.GetMemberCount() != 4 || !strings.HasPrefix(c.GetName(), "Around ") || !strings.Contains(c.GetSummary(), "works with") {
		t.Fatalf("Ruby's community = %v", c)
	}
	res, err := ts.c.Search(ctx, &baagentv1.SearchRequest{Tenant: "t", Query: "Ruby"})
	if err != nil || res.GetHits()[0].GetCommunity().GetId() != ge.GetCommunity().GetId() {
		t.Fatalf("search hit community = %v, %v", res.GetHits(), err)
	}
	// Later passes over the unchanged graph keep the summaries.
	passes := counterValue(t, ts.reg, "baagent_memory_community_passes_total", "result", "ok")
	testkit.Eventually(t, 30*time.Second, "two more passes", func() bool {
		return counterValue(t, ts.reg, "baagent_memory_community_passes_total", "result", "ok") >= passes+2
	})
	if n := sum.calls.Load(); n != 2 {
		t.Fatalf("%d summaries written, want 2 (unchanged communities keep theirs)", n)
	}
}

// TestCommunityBudget checks that summaries beyond the tenant's hourly
// budget are left for later: the first (about 570 tokens estimated, 400
// spent) fits in 700, the second does not.
func TestCommunityBudget(t *testing.T) {
	t.Parallel()
	sum := &countingSummarizer{tokens: 400}
	ts := newTestServer(t, Options{Extractor: clusters(), Summarizer: sum, CommunityTokensPerHour: 700, CommunityInterval: 20 * time.Millisecond}, true)
	ts.add(t, "t", "red")
	ts.add(t, "t", "blue")
	testkit.Eventually(t, 30*time.Second, "a summary over budget", func() bool {
		return counterValue(t, ts.reg, "baagent_memory_community_summaries_total", "result", "over_budget") >= 1
	})
	if n := sum.calls.Load(); n != 1 {
		t.Fatalf("%d summaries written, want 1 within 700 tokens an hour", n)
	}
}
