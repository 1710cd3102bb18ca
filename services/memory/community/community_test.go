package community

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baagent/baagent/internal/scripted"
)

// planted builds groups of size n with dense, heavy edges inside and a few
// light edges between groups; ids are "g<group>-<i>".
func planted(groups, n int, seed uint64) []Edge {
	rnd := rand.New(rand.NewPCG(seed, seed))
	id := func(g, i int) string { return fmt.Sprintf("g%d-%02d", g, i) }
	var edges []Edge
	for g := range groups {
		for i := range n {
			for j := i + 1; j < n; j++ {
				if rnd.Float64() < 0.6 {
					edges = append(edges, Edge{Source: id(g, i), Target: id(g, j), Weight: 1 + rnd.Float64()})
				}
			}
			// Keep every member connected inside its group.
			edges = append(edges, Edge{Source: id(g, i), Target: id(g, (i+1)%n), Weight: 1})
		}
	}
	for range groups * 2 {
		a, b := rnd.IntN(groups), rnd.IntN(groups)
		if a != b {
			edges = append(edges, Edge{Source: id(a, rnd.IntN(n)), Target: id(b, rnd.IntN(n)), Weight: 0.2})
		}
	}
	return edges
}

func TestDetectRecoversPlantedPartitions(t *testing.T) {
	for _, c := range []struct{ groups, n int }{{2, 5}, {4, 10}, {8, 12}} {
		t.Run(fmt.Sprintf("%dx%d", c.groups, c.n), func(t *testing.T) {
			got := Detect(planted(c.groups, c.n, 7), 1.0)
			if len(got) != c.groups {
				t.Fatalf("%d communities, want %d: %v", len(got), c.groups, got)
			}
			for _, comm := range got {
				prefix, _, _ := strings.Cut(comm[0], "-")
				if len(comm) != c.n {
					t.Errorf("community of %d, want %d: %v", len(comm), c.n, comm)
				}
				for _, m := range comm {
					if !strings.HasPrefix(m, prefix+"-") {
						t.Errorf("%s is in the community of %s: %v", m, prefix, comm)
					}
				}
			}
		})
	}
}

func TestDetectIsDeterministic(t *testing.T) {
	edges := planted(6, 9, 3)
	// Add ambiguous structure: a ring of equal weights, where ties decide.
	for i := range 30 {
		edges = append(edges, Edge{Source: fmt.Sprintf("r%02d", i), Target: fmt.Sprintf("r%02d", (i+1)%30), Weight: 1})
	}
	want := Detect(edges, 1.0)
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		shuffled := slices.Clone(edges)
		rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		// Direction does not matter either.
		for i := range shuffled {
			if rnd.IntN(2) == 0 {
				shuffled[i].Source, shuffled[i].Target = shuffled[i].Target, shuffled[i].Source
			}
		}
		got := Detect(shuffled, 1.0)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("different communities for the same graph:\n%v\n%v", got, want)
		}
	}
}

func TestDetectDropsSmallCommunitiesAndBadEdges(t *testing.T) {
	edges := []Edge{
		{"a", "b", 1}, {"b", "c", 1}, {"c", "a", 1}, // a triangle
		{"x", "y", 1}, // a pair: too small
		{"a", "a", 5}, {"", "b", 1}, {"c", "d", -1}, {"c", "e", math.NaN()}, {"c", "f", math.Inf(1)}, {"c", "g", 0},
	}
	got := Detect(edges, math.NaN())
	if fmt.Sprint(got) != "[[a b c]]" {
		t.Fatalf("got %v", got)
	}
	if got := DetectMinSize(edges, 1, 1); len(got) != 2 {
		t.Errorf("min size 1: %v", got)
	}
	if Detect(nil, 1) != nil || Detect([]Edge{{"a", "a", 1}}, 1) != nil {
		t.Error("no edges should give no communities")
	}
}

func TestDetectResolutionSplitsFiner(t *testing.T) {
	edges := planted(4, 10, 11)
	coarse := DetectMinSize(edges, 1.0, 1)
	fine := DetectMinSize(edges, 10, 1)
	if len(coarse) >= len(fine) {
		t.Errorf("resolution 1 gave %d communities, 10 gave %d", len(coarse), len(fine))
	}
}

func TestBudgetCapsTokensPerTenantPerHour(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	b := newBudget(0, func() time.Time { return now })
	if b.Limit() != DefaultTokensPerHour {
		t.Fatalf("limit %d", b.Limit())
	}
	if !b.Reserve("t1", 15000) || b.Reserve("t1", 6000) {
		t.Fatal("the second reservation should not fit")
	}
	if !b.Reserve("t2", 20000) {
		t.Fatal("tenants have separate budgets")
	}
	b.Settle("t1", 15000, 9000)
	if b.Remaining("t1") != 11000 || !b.Reserve("t1", 6000) {
		t.Fatalf("after settling: remaining %d", b.Remaining("t1"))
	}
	b.Settle("t1", 6000, 30000) // overspent: counts
	if b.Remaining("t1") != 0 || b.Reserve("t1", 1) {
		t.Fatal("an overspent tenant must wait")
	}
	now = now.Add(time.Hour)
	if b.Remaining("t1") != 20000 || !b.Reserve("t1", 20000) {
		t.Fatal("a new hour starts afresh")
	}
	b.Settle("t1", 20000, 0)
	if b.Remaining("t1") != 20000 {
		t.Fatalf("a failed call returns its reservation: %d", b.Remaining("t1"))
	}
}

func TestBudgetIsSafeForConcurrentUse(t *testing.T) {
	b := NewBudget(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.Reserve("t", 30) {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 33 {
		t.Fatalf("%d reservations of 30 granted within 1000", granted)
	}
}

var members = []Member{
	{Name: "Hardware", Type: "ProductCategory", Summary: "Servers, storage and network gear."},
	{Name: "Rack Server S10", Type: "Product", Summary: "A rack server.\nSecond line."},
	{Name: "NAS Storage 8TB", Type: "Product"},
}

func TestSummarizeWithTheScriptedModel(t *testing.T) {
	srv, err := scripted.New(scripted.Options{Dir: filepath.Join("..", "..", "..", "examples", "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	base, done, err := srv.StartLoopback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	s, err := NewOpenAISummarizer(SummarizerConfig{BaseURL: base, Model: scripted.ModelName})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Summarize(context.Background(), members, []string{"Rack Server S10 is in the Hardware category."})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Name != "Hardware, Rack Server S10 and 1 more" || !strings.Contains(sum.Summary, "NAS Storage 8TB (Product)") || !strings.Contains(sum.Summary, "[scripted model") || sum.Tokens <= 0 {
		t.Errorf("summary %+v", sum)
	}
	if est := s.Estimate(members, nil); est <= DefaultSummaryTokens {
		t.Errorf("estimate %d", est)
	}
}

type fakeModel struct {
	mu     sync.Mutex
	status int
	body   string
	got    []map[string]any
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.mu.Lock()
	f.got = append(f.got, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	fmt.Fprint(w, f.body)
}

func chat(content, finish string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "c", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
	})
	return string(b)
}

func TestSummarizeRequestAndErrors(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		wantErr   bool
		retryable bool
	}{
		{"ok", 200, chat(`{"name":"Hardware line","summary":"Servers and storage."}`, "stop"), false, false},
		{"rate limited", 429, `{"error":{"message":"slow down","type":"rate_limit"}}`, true, true},
		{"server error", 500, `{"error":{"message":"boom","type":"server_error"}}`, true, true},
		{"bad request", 400, `{"error":{"message":"bad","type":"invalid_request_error"}}`, true, false},
		{"not json", 200, chat("Hardware line", "stop"), true, false},
		{"empty name", 200, chat(`{"name":" ","summary":"x"}`, "stop"), true, false},
		{"cut", 200, chat(`{"name":"Hard`, "length"), true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeModel{status: c.status, body: c.body}
			srv := httptest.NewServer(f)
			defer srv.Close()
			s, _ := NewOpenAISummarizer(SummarizerConfig{BaseURL: srv.URL + "/v1", Model: "gpt-test", MaxMembers: 2})
			sum, err := s.Summarize(context.Background(), members, []string{"f1", "f2"})
			if (err != nil) != c.wantErr || IsRetryable(err) != c.retryable {
				t.Fatalf("err = %v (retryable %v)", err, IsRetryable(err))
			}
			if c.wantErr {
				return
			}
			if sum != (Summary{Name: "Hardware line", Summary: "Servers and storage.", Tokens: 150}) {
				t.Errorf("summary %+v", sum)
			}
			req := f.got[0]
			rf := req["response_format"].(map[string]any)["json_schema"].(map[string]any)
			if rf["name"] != SchemaCommunity || rf["strict"] != true {
				t.Errorf("response_format %v", rf)
			}
			user := req["messages"].([]any)[1].(map[string]any)["content"].(string)
			want := "Members:\n- Hardware (ProductCategory): Servers, storage and network gear.\n- Rack Server S10 (Product): A rack server. Second line.\n(and 1 more members)\n\nFacts:\n- f1\n- f2\n"
			if user != want {
				t.Errorf("user message:\n%q\nwant\n%q", user, want)
			}
		})
	}
	s, _ := NewOpenAISummarizer(SummarizerConfig{BaseURL: "http://127.0.0.1:1", Model: "m"})
	if _, err := s.Summarize(context.Background(), nil, nil); err == nil || IsRetryable(err) {
		t.Errorf("no members: %v", err)
	}
}

func FuzzParseSummary(f *testing.F) {
	f.Add(`{"name":"a","summary":"b"}`)
	f.Add("```json\n{\"name\":\"a\\n\",\"summary\":\"\\u0000b\"}\n```")
	f.Add(`{"name":null}`)
	f.Fuzz(func(t *testing.T, s string) {
		sum, err := ParseSummary(s)
		if err != nil {
			return
		}
		if sum.Name == "" || sum.Summary == "" || strings.ContainsAny(sum.Name, "\n\r\x00") ||
			len([]rune(sum.Name)) > maxNameRunes || len([]rune(sum.Summary)) > maxSummaryRunes {
			t.Fatalf("invalid summary %+v", sum)
		}
	})
}

// BenchmarkDetect runs Louvain on 100k entities and 200k relations: 2,000
// planted groups of 50 with 190k edges inside groups and 10k between.
func BenchmarkDetect(b *testing.B) {
	const nodes, edgesN, groupSize = 100_000, 200_000, 50
	rnd := rand.New(rand.NewPCG(42, 42))
	edges := make([]Edge, 0, edgesN)
	groups := nodes / groupSize
	for len(edges) < edgesN*95/100 {
		g := rnd.IntN(groups)
		a, c := rnd.IntN(groupSize), rnd.IntN(groupSize)
		edges = append(edges, Edge{Source: fmt.Sprintf("e%06d", g*groupSize+a), Target: fmt.Sprintf("e%06d", g*groupSize+c), Weight: 1})
	}
	for len(edges) < edgesN {
		edges = append(edges, Edge{Source: fmt.Sprintf("e%06d", rnd.IntN(nodes)), Target: fmt.Sprintf("e%06d", rnd.IntN(nodes)), Weight: 0.5})
	}
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for b.Loop() {
		n = len(Detect(edges, 1.0))
	}
	b.ReportMetric(float64(n), "communities")
}

func TestSummarizeSwitchesToMaxCompletionTokens(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls++
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), `"max_tokens"`) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens"}}`)
			return
		}
		fmt.Fprint(w, chat(`{"name":"n","summary":"s"}`, "stop"))
	}))
	defer srv.Close()
	s, _ := NewOpenAISummarizer(SummarizerConfig{BaseURL: srv.URL + "/v1", Model: "o-test"})
	for range 2 {
		if _, err := s.Summarize(context.Background(), members, nil); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 3 {
		t.Errorf("%d calls, want 3 (one refused, then max_completion_tokens twice)", calls)
	}
}
