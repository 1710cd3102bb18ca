package patterns

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The documented constants, pinned: a change here is a product change.
func TestConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"SignatureWeight", SignatureWeight, 0.50},
		{"EntityOverlapWeight", EntityOverlapWeight, 0.20},
		{"RecencyWeight", RecencyWeight, 0.15},
		{"SuccessWeight", SuccessWeight, 0.15},
		{"SuccessBonusAbove", SuccessBonusAbove, 0.8},
		{"ReuseAbove", ReuseAbove, 0.8},
		{"ReferenceFrom", ReferenceFrom, 0.5},
		{"MaxCandidates", MaxCandidates, 3},
		{"MinSuccesses", MinSuccesses, 3},
		{"MinSuccessRate", MinSuccessRate, 0.6},
		{"UntrustedAfterFailures", UntrustedAfterFailures, 5},
		{"DraftBelowRate", DraftBelowRate, 0.4},
		{"DecayFactor", DecayFactor, 0.8},
		{"RecencyWindow days", RecencyWindow.Hours() / 24, 7},
		{"QueryWindow days", QueryWindow.Hours() / 24, 7},
		{"ArchiveAfter days", ArchiveAfter.Hours() / 24, 180},
		{"DecayAfter days", DecayAfter.Hours() / 24, 90},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s := SignatureWeight + EntityOverlapWeight + RecencyWeight + SuccessWeight; !near(s, 1) {
		t.Errorf("the score parts add up to %v, want 1", s)
	}
}

func active(id string, sig Signature, entities []string) *Pattern {
	return &Pattern{ID: id, Signature: sig, Entities: entities, UsageCount: 4, SuccessCount: 4, SuccessRate: 1,
		CreatedAt: t0.Add(-30 * day), UpdatedAt: t0.Add(-day), LastUsedAt: t0.Add(-day), LastQueriedAt: t0.Add(-day)}
}

func TestScoreParts(t *testing.T) {
	sig := Signature{TaskType: TaskComparison, EntityTypes: []string{"region", "timeperiod"}}
	q := Query{Signature: sig, Entities: []string{"West", "2025"}}
	for _, c := range []struct {
		name string
		edit func(p *Pattern)
		want float64
		mode Mode
	}{
		{"everything", func(p *Pattern) {}, 0.50 + 0.20 + 0.15 + 0.15, ModeReuse},
		{"half the entities", func(p *Pattern) { p.Entities = []string{"west", "east", "2025"} }, 0.50 + 0.20*2.0/3 + 0.15 + 0.15, ModeReuse},
		{"no entity overlap", func(p *Pattern) { p.Entities = []string{"east"} }, 0.50 + 0.15 + 0.15, ModeReference},
		{"stale by 8 days", func(p *Pattern) { p.UpdatedAt = t0.Add(-8 * day) }, 0.50 + 0.20 + 0.15, ModeReuse},
		{"rate exactly 0.8 earns no bonus", func(p *Pattern) { p.SuccessRate = 0.8 }, 0.50 + 0.20 + 0.15, ModeReuse},
		{"other task type", func(p *Pattern) { p.Signature.TaskType = TaskTrend }, 0.20 + 0.15 + 0.15, ModeReference},
		{"other task type, stale", func(p *Pattern) { p.Signature.TaskType = TaskTrend; p.UpdatedAt = t0.Add(-8 * day) }, 0.20 + 0.15, ModeNone},
		{"other entity types", func(p *Pattern) { p.Signature.EntityTypes = []string{"product"} }, 0.20 + 0.15 + 0.15, ModeReference},
		{"only signature and entities", func(p *Pattern) { p.UpdatedAt = t0.Add(-8 * day); p.SuccessRate = 0.7 }, 0.50 + 0.20, ModeReference},
		{"only the signature", func(p *Pattern) { p.UpdatedAt = t0.Add(-8 * day); p.SuccessRate = 0.7; p.Entities = nil }, 0.50, ModeReference},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := active("p1", Signature{TaskType: TaskComparison, EntityTypes: []string{"Region", "TimePeriod"}}, []string{"west", "2025"})
			c.edit(p)
			b := Score(q, p, t0)
			if !near(b.Score, c.want) {
				t.Fatalf("score %v, want %v (%+v)", b.Score, c.want, b)
			}
			if m := ModeFor(b.Score); m != c.mode {
				t.Fatalf("mode %v, want %v", m, c.mode)
			}
		})
	}
}

func TestModeBoundaries(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want Mode
	}{{0.81, ModeReuse}, {0.8, ModeReference}, {0.5, ModeReference}, {0.4999, ModeNone}, {0, ModeNone}} {
		if got := ModeFor(c.s); got != c.want {
			t.Errorf("ModeFor(%v) = %v, want %v", c.s, got, c.want)
		}
	}
}

func TestRankOffersOnlyActiveAndAtMostThree(t *testing.T) {
	sig := Signature{TaskType: TaskRanking, EntityTypes: []string{"productcategory"}}
	var ps []*Pattern
	for i := range 5 {
		p := active(fmt.Sprintf("p%d", i), sig, []string{"software"})
		p.SuccessRate = 0.81 + float64(i)/100
		ps = append(ps, p)
	}
	cand := active("cand", sig, []string{"software"})
	cand.SuccessCount, cand.UsageCount = 2, 2 // below the admission gate
	ps = append(ps, cand)
	got := Rank(Query{Signature: sig, Entities: []string{"Software"}}, ps, t0)
	if len(got) != MaxCandidates {
		t.Fatalf("%d candidates, want %d", len(got), MaxCandidates)
	}
	for i, want := range []string{"p4", "p3", "p2"} {
		if got[i].Pattern.ID != want || got[i].Mode != ModeReuse {
			t.Errorf("candidate %d = %s (%v), want %s reuse", i, got[i].Pattern.ID, got[i].Mode, want)
		}
	}
}

func TestGates(t *testing.T) {
	sig := Signature{TaskType: TaskLookup}
	for _, c := range []struct {
		name string
		edit func(p *Pattern)
		want State
	}{
		{"admitted", func(p *Pattern) {}, StateActive},
		{"two successes", func(p *Pattern) { p.SuccessCount, p.UsageCount = 2, 2 }, StateCandidate},
		{"rate 0.59", func(p *Pattern) { p.SuccessRate = 0.59 }, StateCandidate},
		{"rate 0.6 admits", func(p *Pattern) { p.SuccessRate = 0.6 }, StateActive},
		{"never queried", func(p *Pattern) { p.LastQueriedAt = time.Time{} }, StateCandidate},
		{"queried 8 days ago", func(p *Pattern) { p.LastQueriedAt = t0.Add(-8 * day) }, StateCandidate},
		{"five failures in a row", func(p *Pattern) { p.ConsecutiveFailures = 5 }, StateActive},
		{"six failures in a row", func(p *Pattern) { p.ConsecutiveFailures = 6 }, StateUntrusted},
		{"rate 0.39", func(p *Pattern) { p.SuccessRate = 0.39 }, StateDraft},
		{"rate 0.4 is no draft", func(p *Pattern) { p.SuccessRate = 0.4 }, StateCandidate},
		{"unused 181 days", func(p *Pattern) {
			p.UpdatedAt, p.LastUsedAt = t0.Add(-181*day), t0.Add(-181*day)
		}, StateArchived},
		{"used 179 days ago", func(p *Pattern) {
			p.UpdatedAt, p.LastUsedAt, p.SuccessRate = t0.Add(-179*day), t0.Add(-179*day), 1
		}, StateActive},
		{"decayed below the gate", func(p *Pattern) {
			// 0.7 × 0.8 = 0.56 after 91 untouched days.
			p.SuccessRate, p.UpdatedAt, p.LastUsedAt = 0.7, t0.Add(-91*day), t0.Add(-91*day)
		}, StateCandidate},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := active("p", sig, nil)
			c.edit(p)
			if got := Evaluate(p, t0); got != c.want {
				t.Fatalf("Evaluate = %v, want %v", got, c.want)
			}
		})
	}
}

func TestEffectiveSuccessRateDecays(t *testing.T) {
	p := &Pattern{SuccessRate: 1, UpdatedAt: t0}
	for _, c := range []struct {
		after time.Duration
		want  float64
	}{{89 * day, 1}, {90 * day, 0.8}, {179 * day, 0.8}, {180 * day, 0.64}} {
		if got := EffectiveSuccessRate(p, t0.Add(c.after)); !near(got, c.want) {
			t.Errorf("after %v: %v, want %v", c.after, got, c.want)
		}
	}
}

func trace(goal string, ok bool, d int64, tools ...string) *Trace {
	t := &Trace{UserGoal: goal, Success: ok, DurationMs: d, EntityTypes: []string{"Region"}, Entities: []string{"West"}}
	for _, tool := range tools {
		t.ToolCalls = append(t.ToolCalls, ToolCall{Tool: tool, Success: true})
	}
	return t
}

func TestEvolveCounts(t *testing.T) {
	p := FromTrace(trace("Which region had the highest revenue?", true, 1000, "sql_query"), "p", "acme", t0)
	Evolve(p, trace("Which region had the highest revenue?", false, 0), t0.Add(time.Hour))
	if p.UsageCount != 2 || p.SuccessCount != 1 || p.FailureCount != 1 || p.ConsecutiveFailures != 1 || !near(p.SuccessRate, 0.5) {
		t.Fatalf("after a failure: %+v", p)
	}
	Evolve(p, trace("Which region had the highest revenue?", true, 900, "sql_query"), t0.Add(2*time.Hour))
	if p.ConsecutiveFailures != 0 || !near(p.SuccessRate, 2.0/3) {
		t.Fatalf("after a success: %+v", p)
	}
}

func TestEvolveDecaysAStaleUse(t *testing.T) {
	p := FromTrace(trace("top region", true, 1000, "sql_query"), "p", "acme", t0)
	Evolve(p, trace("top region", true, 1000, "sql_query"), t0.Add(91*day))
	if !near(p.SuccessRate, 0.8) {
		t.Fatalf("rate %v, want 1 × 0.8", p.SuccessRate)
	}
	Evolve(p, trace("top region", true, 1000, "sql_query"), t0.Add(92*day))
	if !near(p.SuccessRate, 1) {
		t.Fatalf("rate %v, want 1 once fresh", p.SuccessRate)
	}
}

func TestEvolveCorrectionAdjustsStep(t *testing.T) {
	tr := trace("Compare 2025 and 2026 revenue by region", true, 1000)
	tr.PlanSteps = []PlanStep{{Description: "Total revenue by region per year", Tools: []string{"sql_query"}, Done: true}, {Description: "Write the comparison", Done: true}}
	p := FromTrace(tr, "p", "acme", t0)
	fix := trace("Compare 2025 and 2026 revenue by region", true, 1000)
	fix.Corrections = []Correction{{PlanStep: 1, AgentError: "summed unit_price only", HumanFix: "revenue is quantity × unit_price", Tools: []string{"sql_query", "python"}}}
	Evolve(p, fix, t0.Add(time.Hour))
	st := p.Steps[0]
	if len(st.Corrections) != 1 || st.Corrections[0] != "revenue is quantity × unit_price" || len(st.Tools) != 2 || st.Tools[1] != "python" {
		t.Fatalf("step after the correction: %+v", st)
	}
	if got := p.SuccessFactors.CommonCorrections; len(got) != 1 {
		t.Fatalf("common corrections %v", got)
	}
	if len(p.Steps[1].Corrections) != 0 {
		t.Fatalf("the other step changed: %+v", p.Steps[1])
	}
}

func TestEvolveDecisionPreference(t *testing.T) {
	q := "Which region first?"
	tr := trace("Prepare the regional revenue review", true, 1000)
	tr.Decisions = []Decision{{Question: q, Recommended: "West", UserChoice: "West", Impact: "high"}}
	p := FromTrace(tr, "p", "acme", t0)
	if p.Decisions[0].Recommended != "West" || p.SuccessFactors.CriticalDecisions[0] != q {
		t.Fatalf("learned %+v", p)
	}
	other := trace("Prepare the regional revenue review", true, 1000)
	other.Decisions = []Decision{{Question: q, Recommended: "West", UserChoice: "East"}}
	Evolve(p, other, t0.Add(time.Hour))
	// West 1, East 1: the user's different choice takes the recommendation.
	if got := p.Decisions[0]; got.Recommended != "East" || got.Choices["East"] != 1 || got.Choices["West"] != 1 {
		t.Fatalf("after a different choice: %+v", got)
	}
	back := trace("Prepare the regional revenue review", true, 1000)
	back.Decisions = []Decision{{Question: q, Recommended: "East", UserChoice: "West"}}
	Evolve(p, back, t0.Add(2*time.Hour))
	if got := p.Decisions[0]; got.Recommended != "West" || got.Choices["West"] != 2 {
		t.Fatalf("after choosing West again: %+v", got)
	}
}

func TestEvolveFasterRunUpdatesToolChain(t *testing.T) {
	p := FromTrace(trace("top region", true, 10_000, "glob", "file_read", "sql_query"), "p", "acme", t0)
	Evolve(p, trace("top region", true, 20_000, "glob", "sql_query", "sql_query"), t0.Add(time.Hour))
	if len(p.ToolChains) != 1 || p.ToolChains[0][0] != "glob" || len(p.ToolChains[0]) != 3 {
		t.Fatalf("a slower run changed the chain: %v", p.ToolChains)
	}
	if p.AvgDurationMs != 15_000 {
		t.Fatalf("average %d, want 15000", p.AvgDurationMs)
	}
	Evolve(p, trace("top region", true, 2_000, "sql_query"), t0.Add(2*time.Hour))
	if len(p.ToolChains) != 2 || len(p.ToolChains[0]) != 1 || p.ToolChains[0][0] != "sql_query" {
		t.Fatalf("a faster run's chain is not first: %v", p.ToolChains)
	}
}

// Three successful runs of one kind of task make an active pattern by the
// fourth request, provided retrieval looked for it.
func TestLearnOverThreeRunsThenOffer(t *testing.T) {
	var ps []*Pattern
	n := 0
	newPattern := func() *Pattern { n++; return &Pattern{ID: fmt.Sprintf("p%d", n), Tenant: "acme"} }
	goals := []string{
		"Which region had the highest revenue in 2025?",
		"Which region had the highest revenue in Q3?",
		"Which region had the highest revenue last month?",
	}
	now := t0
	for i, g := range goals {
		q := Query{Signature: NewSignature(g, []string{"Region"}), Entities: []string{"West"}}
		if got := Rank(q, ps, now); len(got) != 0 {
			t.Fatalf("run %d was offered %v before the pattern was admitted", i+1, got[0].Pattern.ID)
		}
		for _, p := range ps { // retrieval looked at it
			if SignatureMatch(q.Signature, p.Signature) {
				p.LastQueriedAt = now
			}
		}
		p, created := Learn(trace(g, true, 1000, "sql_query"), ps, now, newPattern)
		if created {
			ps = append(ps, p)
		}
		now = now.Add(time.Hour)
	}
	if len(ps) != 1 || ps[0].SuccessCount != 3 {
		t.Fatalf("patterns after three runs: %+v", ps)
	}
	q := Query{Signature: NewSignature("Which region had the highest revenue this year?", []string{"Region"}), Entities: []string{"West"}}
	got := Rank(q, ps, now)
	if len(got) != 1 || got[0].Mode != ModeReuse {
		t.Fatalf("the fourth request was offered %+v", got)
	}
}

func TestLearnIgnoresFailureWithoutPattern(t *testing.T) {
	p, created := Learn(trace("top region", false, 0), nil, t0, func() *Pattern { return &Pattern{ID: "x"} })
	if p != nil || created {
		t.Fatalf("a failed trace created %+v", p)
	}
}

func TestClassifyTask(t *testing.T) {
	for goal, want := range map[string]string{
		"Check the orders data for quality problems before we analyse it.":                  TaskDataQuality,
		"Compare Q3 and Q4 2025 revenue by region and customer segment and write a report.": TaskReport,
		"Compare our revenue across periods.":                                               TaskComparison,
		"How did revenue grow by region from Q2 to Q3 2026?":                                TaskTrend,
		"Which product category had the highest revenue last quarter?":                      TaskRanking,
		"What was the average order value by region in 2026?":                               TaskBreakdown,
		"What is the email of our account manager?":                                         TaskLookup,
		"对比2025年和2026年各地区的收入":                                                               TaskComparison,
		"哪个产品类别的收入最高？":                                                                      TaskRanking,
		"Show the topology":                                                                 TaskLookup, // "top" is a whole word cue
	} {
		if got := ClassifyTask(goal); got != want {
			t.Errorf("ClassifyTask(%q) = %s, want %s", goal, got, want)
		}
	}
}

func FuzzClassifyTask(f *testing.F) {
	f.Add("Which product category had the highest revenue last quarter?")
	f.Add("对比2025年和2026年各地区的收入")
	f.Add("\xff\xfe top*")
	f.Fuzz(func(t *testing.T, goal string) {
		got := ClassifyTask(goal)
		ok := false
		for _, r := range taskRules {
			ok = ok || r.typ == got
		}
		if !ok && got != TaskLookup {
			t.Fatalf("unknown task type %q", got)
		}
		if c := cut(goal, 200); len(c) > 200 {
			t.Fatalf("cut to %d bytes", len(c))
		}
	})
}

func TestLearnRefinesASignatureWithoutEntityTypes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := &Trace{UserGoal: "Top 5 products by revenue", Success: true, ToolCalls: []ToolCall{{Tool: "sql_query", Success: true}}}
	ids := 0
	newPattern := func() *Pattern { ids++; return &Pattern{ID: fmt.Sprintf("pt_%d", ids), Tenant: "acme"} }
	p, created := Learn(first, nil, now, newPattern)
	if !created || len(p.Signature.EntityTypes) != 0 || p.Name != "ranking" {
		t.Fatalf("first trace: created=%v signature=%+v name=%q", created, p.Signature, p.Name)
	}
	second := &Trace{UserGoal: "Top 3 products by revenue", Success: true, EntityTypes: []string{"Product"}, Entities: []string{"Widget"}}
	got, created := Learn(second, []*Pattern{p}, now.Add(time.Hour), newPattern)
	if created || got != p {
		t.Fatalf("a pattern without entity types must take a trace of its task type; created=%v", created)
	}
	if !slices.Equal(p.Signature.EntityTypes, []string{"product"}) || p.Name != "ranking of product" {
		t.Fatalf("signature not refined: %+v name %q", p.Signature, p.Name)
	}
	// Refined, it follows the ordinary rule: other entity types make a new pattern.
	third := &Trace{UserGoal: "Top regions by revenue", Success: true, EntityTypes: []string{"region"}}
	if _, created := Learn(third, []*Pattern{p}, now.Add(2*time.Hour), newPattern); !created {
		t.Fatal("a refined pattern took a trace of other entity types")
	}
	// A failed trace does not refine.
	q := &Pattern{ID: "pt_x", Signature: Signature{TaskType: TaskTrend}, Name: "trend", UpdatedAt: now}
	Evolve(q, &Trace{UserGoal: "monthly trend", EntityTypes: []string{"metric"}}, now)
	if len(q.Signature.EntityTypes) != 0 {
		t.Fatalf("a failed trace refined the signature: %+v", q.Signature)
	}
}

func TestLearnSkipsWhenNewPatternDeclines(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &Trace{UserGoal: "compare north and south", Success: true}
	if p, created := Learn(tr, nil, now, func() *Pattern { return nil }); p != nil || created {
		t.Fatalf("learned %v, created %v; want nothing", p, created)
	}
}
