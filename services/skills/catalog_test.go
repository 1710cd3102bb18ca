package skills

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// catalogRoot has 4 system, 3 tenant and 2 project skills for tenant "t",
// project "p", with descriptions of different lengths.
func catalogRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	desc := func(i int) string {
		return fmt.Sprintf("Skill number %d analyses business data. ", i) + strings.Repeat("It explains results in plain words and checks its figures twice. ", i%3+1)
	}
	for i, n := range []string{"sys-a", "sys-b", "sys-c", "sys-d"} {
		addSkill(t, root, "", n, desc(i))
	}
	for i, n := range []string{"ten-a", "ten-b", "ten-c"} {
		addSkill(t, root, "tenants/t", n, desc(i+4))
	}
	for i, n := range []string{"pro-a", "pro-b"} {
		addSkill(t, root, "tenants/t/projects/p", n, desc(i+7))
	}
	addSkill(t, root, "", "short", "Short & \"quoted\".")
	return root
}

var skillLineRE = regexp.MustCompile(`<skill name="([a-z0-9-]+)" layer="(system|tenant|project)"(/>|>(.*)</skill>)`)

type catalogEntry struct{ name, layer, desc string }

func parseCatalog(t *testing.T, text string) (entries []catalogEntry, note string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	if lines[0] != catalogOpen || lines[len(lines)-1] != catalogClose {
		t.Fatalf("catalog not wrapped in %s: %q", catalogOpen, text)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if strings.HasPrefix(l, "<note>") {
			note = l
			continue
		}
		m := skillLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected catalog line %q", l)
		}
		entries = append(entries, catalogEntry{m[1], m[2], m[4]})
	}
	return entries, note
}

func getCatalog(t *testing.T, s *Server, budget int64) (*baagentv1.GetCatalogResponse, error) {
	t.Helper()
	return s.GetCatalog(context.Background(), &baagentv1.GetCatalogRequest{Tenant: "t", Project: "p", TokenBudget: budget})
}

func TestCatalogWithoutBudget(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, catalogRoot(t))
	resp, err := getCatalog(t, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries, note := parseCatalog(t, resp.GetText())
	if len(entries) != 10 || resp.GetSkillCount() != 10 || note != "" || resp.GetShortenedCount() != 0 || resp.GetNameOnlyCount() != 0 {
		t.Fatalf("full catalog: %d entries, note %q, resp %v", len(entries), note, resp)
	}
	if resp.GetTokens() != int64(EstimateTokens(resp.GetText())) {
		t.Errorf("tokens %d, estimate of the text %d", resp.GetTokens(), EstimateTokens(resp.GetText()))
	}
	if !strings.Contains(resp.GetText(), `<skill name="short" layer="system">Short &amp; &quot;quoted&quot;.</skill>`) {
		t.Errorf("description not escaped:\n%s", resp.GetText())
	}
	if !strings.Contains(resp.GetText(), `<skill name="pro-a" layer="project">`) || !strings.Contains(resp.GetText(), `<skill name="ten-c" layer="tenant">`) {
		t.Errorf("layers missing:\n%s", resp.GetText())
	}
	// A tenant that does not exist sees the system skills only.
	other, err := s.GetCatalog(context.Background(), &baagentv1.GetCatalogRequest{Tenant: "other"})
	if err != nil || other.GetSkillCount() != 5 {
		t.Fatalf("other tenant: %v, %v", other, err)
	}
	// A budget the full catalog fits in changes nothing.
	fits, err := getCatalog(t, s, resp.GetTokens())
	if err != nil || fits.GetText() != resp.GetText() {
		t.Fatalf("budget = full size: %v", err)
	}
}

// TestCatalogBudgetBehaviour walks the budget down from the full size and
// checks, at every step, the stated order: descriptions shortened (longest
// first), then skills by name only (system, then tenant, then project), then
// left out — always within budget, and always said.
func TestCatalogBudgetBehaviour(t *testing.T) {
	t.Parallel()

	s := newTestServer(t, catalogRoot(t))
	full, err := getCatalog(t, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	fullEntries, _ := parseCatalog(t, full.GetText())
	fullDesc := map[string]string{}
	for _, e := range fullEntries {
		fullDesc[e.name] = e.desc
	}
	var sawShortened, sawNameOnly, sawOmitted, sawExhausted bool
	for budget := full.GetTokens() - 1; budget > 0; budget-- {
		resp, err := getCatalog(t, s, budget)
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprintf("token_budget %d is too small for a catalog of 10 skills", budget)) {
				t.Fatalf("budget %d: %v", budget, err)
			}
			sawExhausted = true
			continue
		}
		if sawExhausted {
			t.Fatalf("budget %d fits after a larger budget did not", budget)
		}
		if resp.GetTokens() > budget {
			t.Fatalf("budget %d: catalog takes %d tokens", budget, resp.GetTokens())
		}
		entries, note := parseCatalog(t, resp.GetText())
		shortened, nameOnly := 0, 0
		seenNameOnly := map[string]bool{}
		for _, e := range entries {
			switch {
			case e.desc == "":
				nameOnly++
				seenNameOnly[e.layer] = true
			case e.desc != fullDesc[e.name]:
				shortened++
				if !strings.HasSuffix(e.desc, "…") || len(e.desc) >= len(fullDesc[e.name]) {
					t.Fatalf("budget %d: %s shortened to %q", budget, e.name, e.desc)
				}
			}
		}
		omitted := 10 - len(entries)
		if int(resp.GetSkillCount()) != len(entries) || int(resp.GetShortenedCount()) != shortened || int(resp.GetNameOnlyCount()) != nameOnly {
			t.Fatalf("budget %d: response counts %v, text has %d entries, %d shortened, %d name only", budget, resp, len(entries), shortened, nameOnly)
		}
		// Never a silent drop: the note states each kind of cut.
		for _, c := range []struct {
			n    int
			what string
		}{{shortened, "shortened"}, {nameOnly, "listed by name only"}, {omitted, "not listed"}} {
			if (c.n > 0) != strings.Contains(note, c.what) || c.n > 0 && !strings.Contains(note, fmt.Sprint(c.n)) {
				t.Fatalf("budget %d: %d %s, note %q", budget, c.n, c.what, note)
			}
		}
		// Order: a project skill loses its description only after every
		// tenant one, a tenant one only after every system one.
		if seenNameOnly["project"] && nameOnlyIn(entries, "tenant") != 3-omittedIn(entries, "tenant", 3) ||
			seenNameOnly["tenant"] && nameOnlyIn(entries, "system") != 5-omittedIn(entries, "system", 5) {
			t.Fatalf("budget %d: name-only order broken:\n%s", budget, resp.GetText())
		}
		if shortened > 0 && nameOnly == 0 && omitted == 0 {
			sawShortened = true
			// The shortest description is the last to be cut.
			for _, e := range entries {
				if e.name == "short" && e.desc != fullDesc["short"] && shortened < 9 {
					t.Fatalf("budget %d: the shortest description was cut before longer ones", budget)
				}
			}
		}
		sawNameOnly = sawNameOnly || nameOnly > 0
		sawOmitted = sawOmitted || omitted > 0
	}
	if !sawShortened || !sawNameOnly || !sawOmitted || !sawExhausted {
		t.Fatalf("not every stage reached: shortened %v, name only %v, omitted %v, exhausted %v", sawShortened, sawNameOnly, sawOmitted, sawExhausted)
	}
}

func nameOnlyIn(entries []catalogEntry, layer string) int {
	n := 0
	for _, e := range entries {
		if e.layer == layer && e.desc == "" {
			n++
		}
	}
	return n
}

func omittedIn(entries []catalogEntry, layer string, total int) int {
	n := 0
	for _, e := range entries {
		if e.layer == layer {
			n++
		}
	}
	return total - n
}

// scaledCounter counts like a tokenizer that needs factor times the
// estimate, so the planner has to re-plan with the real counts.
type scaledCounter struct {
	factor float64
	calls  int
	fail   error
}

func (c *scaledCounter) CountTokens(_ context.Context, text, _ string) (int, error) {
	c.calls++
	if c.fail != nil {
		return 0, c.fail
	}
	return int(float64(EstimateTokens(text))*c.factor + 0.5), nil
}

func TestCatalogFitsTheModelsCount(t *testing.T) {
	t.Parallel()

	root := catalogRoot(t)
	for _, factor := range []float64{0.5, 1.3, 2} {
		c := &scaledCounter{factor: factor}
		s := newTestServer(t, root, func(o *Options) { o.Counter = c })
		for _, budget := range []int64{600, 300, 150, 80} {
			resp, err := s.GetCatalog(context.Background(), &baagentv1.GetCatalogRequest{Tenant: "t", Project: "p", Model: "gpt-4o", TokenBudget: budget})
			if status.Code(err) == codes.ResourceExhausted {
				continue
			}
			if err != nil {
				t.Fatalf("factor %v budget %d: %v", factor, budget, err)
			}
			if resp.GetTokens() > budget || resp.GetTokens() != int64(float64(EstimateTokens(resp.GetText()))*factor+0.5) {
				t.Fatalf("factor %v budget %d: tokens %d", factor, budget, resp.GetTokens())
			}
		}
	}
}

func TestCatalogCounterFallbackAndCache(t *testing.T) {
	t.Parallel()

	c := &scaledCounter{factor: 1.1}
	s := newTestServer(t, catalogRoot(t), func(o *Options) { o.Counter = c })
	req := &baagentv1.GetCatalogRequest{Tenant: "t", Project: "p", Model: "gpt-4o", TokenBudget: 200}
	first, err := s.GetCatalog(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	calls := c.calls
	again, err := s.GetCatalog(context.Background(), req)
	if err != nil || again.GetText() != first.GetText() || c.calls != calls {
		t.Fatalf("cached catalog: %v; counter calls %d -> %d", err, calls, c.calls)
	}

	// A failing counter: the estimate is used (once failed, not asked again
	// within the request), and the result is not cached.
	c.fail = errors.New("tokens service down")
	req.TokenBudget = 150
	calls = c.calls
	resp, err := s.GetCatalog(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if c.calls != calls+1 || resp.GetTokens() != int64(EstimateTokens(resp.GetText())) || resp.GetTokens() > 150 {
		t.Fatalf("fallback: %d counter calls, tokens %d (estimate %d)", c.calls-calls, resp.GetTokens(), EstimateTokens(resp.GetText()))
	}
	if !s.counterFailed.Load() {
		t.Error("counter failure not recorded")
	}
	c.fail = nil
	resp, err = s.GetCatalog(context.Background(), req)
	if err != nil || c.calls == calls+1 || s.counterFailed.Load() {
		t.Fatalf("after recovery: %v, calls %d, failed %v", err, c.calls-calls, s.counterFailed.Load())
	}
	if resp.GetTokens() != int64(float64(EstimateTokens(resp.GetText()))*1.1+0.5) {
		t.Errorf("after recovery the counter's count is not used: %d", resp.GetTokens())
	}

	// A request without a model uses the estimate, without asking.
	calls = c.calls
	if _, err := s.GetCatalog(context.Background(), &baagentv1.GetCatalogRequest{Tenant: "t", TokenBudget: 100}); err != nil || c.calls != calls {
		t.Fatalf("no model: %v, %d calls", err, c.calls-calls)
	}

	// A cancelled request is not answered with an estimate.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.fail = context.Canceled
	if _, err := s.GetCatalog(ctx, &baagentv1.GetCatalogRequest{Tenant: "t", Model: "gpt-4o", TokenBudget: 99}); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestCatalogCacheIsBounded(t *testing.T) {
	t.Parallel()

	c := newCatalogCache()
	for i := range maxCatalogCache * 3 {
		c.put(catalogKey{gen: 1, tenant: fmt.Sprint(i)}, &baagentv1.GetCatalogResponse{Text: "x"})
		if n := c.entries.Len(); n > maxCatalogCache {
			t.Fatalf("cache holds %d entries", n)
		}
	}
	// Full, it evicts the least recently used: the newest entries stay.
	for i := maxCatalogCache * 2; i < maxCatalogCache*3; i++ {
		if c.get(catalogKey{gen: 1, tenant: fmt.Sprint(i)}) == nil {
			t.Fatalf("entry %d of the last %d was evicted", i, maxCatalogCache)
		}
	}
	c.put(catalogKey{gen: 2, tenant: "new"}, &baagentv1.GetCatalogResponse{Text: "y"})
	if c.entries.Len() != 1 || c.get(catalogKey{gen: 1, tenant: "1"}) != nil {
		t.Fatal("entries of an older generation survived")
	}
	c.put(catalogKey{gen: 1, tenant: "stale"}, &baagentv1.GetCatalogResponse{Text: "z"})
	if c.get(catalogKey{gen: 1, tenant: "stale"}) != nil {
		t.Fatal("a stale generation was cached")
	}
	got := c.get(catalogKey{gen: 2, tenant: "new"})
	got.Text = "changed"
	if c.get(catalogKey{gen: 2, tenant: "new"}).GetText() != "y" {
		t.Fatal("a caller changed the cached response")
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()

	cases := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"analyse the sales data by region", 20, "analyse the sales…"},
		{"abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…"},
		{"数据质量检查和报告", 5, "数据质量…"},
		{"anything", 1, "…"},
	}
	for _, c := range cases {
		got := shorten(c.in, c.limit)
		if got != c.want || len([]rune(got)) > c.limit {
			t.Errorf("shorten(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
}

func TestEstimateTokensIsAdditiveOverLines(t *testing.T) {
	t.Parallel()

	lines := []string{"<skill name=\"a\" layer=\"system\">Analyse   sales 2025 data.</skill>", "数据 quality", "", "x&amp;y"}
	sum := len(lines) - 1
	for _, l := range lines {
		sum += EstimateTokens(l)
	}
	if got := EstimateTokens(strings.Join(lines, "\n")); got != sum {
		t.Fatalf("estimate of the joined text %d, sum of lines %d", got, sum)
	}
	if EstimateTokens("") != 0 || EstimateTokens("abc") != 1 || EstimateTokens("abcd") != 2 || EstimateTokens("a b") != 2 {
		t.Fatal("estimate basics")
	}
}
