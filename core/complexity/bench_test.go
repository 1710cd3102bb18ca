package complexity

import (
	"strings"
	"testing"
)

// BenchmarkClassify200 is a typical long request (about 200 characters).
func BenchmarkClassify200(b *testing.B) {
	q := "Analyse revenue, cost and profit by region and channel for the last 6 months, compare them with the same period last year, and write a comprehensive report with recommendations for the board."
	b.SetBytes(int64(len(q)))
	b.ReportAllocs()
	for b.Loop() {
		Classify(q)
	}
}

// BenchmarkClassify1MiB is the largest request a run accepts, mixed
// English and Chinese: linear time, no blow-up.
func BenchmarkClassify1MiB(b *testing.B) {
	unit := "Compare Q3 and Q4 revenue by region; 分析过去6个月各渠道的收入和利润，另外写报告。 "
	q := strings.Repeat(unit, (1<<20)/len(unit))
	b.SetBytes(int64(len(q)))
	b.ReportAllocs()
	for b.Loop() {
		Classify(q)
	}
}
