package patterns

import (
	"fmt"
	"testing"
)

// BenchmarkRank10k scores a request against 10,000 patterns of one tenant
// (the retrieval size), all admitted, a third of them matching.
func BenchmarkRank10k(b *testing.B) {
	types := []string{TaskRanking, TaskTrend, TaskComparison}
	ps := make([]*Pattern, 10_000)
	for i := range ps {
		ps[i] = active(fmt.Sprintf("p%05d", i), Signature{TaskType: types[i%3], EntityTypes: []string{"productcategory", "region"}},
			[]string{"software", fmt.Sprintf("region-%d", i%50), "2026"})
	}
	q := Query{Signature: Signature{TaskType: TaskRanking, EntityTypes: []string{"ProductCategory", "Region"}}, Entities: []string{"Software", "region-7"}}
	b.ReportAllocs()
	for b.Loop() {
		if got := Rank(q, ps, t0); len(got) != MaxCandidates {
			b.Fatal(len(got))
		}
	}
}
