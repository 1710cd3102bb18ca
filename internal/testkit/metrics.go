package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// SeriesCount is the number of series g exposes: what a scrape returns.
func SeriesCount(tb testing.TB, g prometheus.Gatherer) int {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}
