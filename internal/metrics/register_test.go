package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newCounter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "test"})
}

func TestRegisterExclusiveIsAllOrNothing(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	if err := RegisterExclusive(reg, "first", newCounter("a_total"), newCounter("b_total")); err != nil {
		t.Fatal(err)
	}
	// A second owner collides on b_total: c_total must not stay registered.
	err := RegisterExclusive(reg, "second", newCounter("c_total"), newCounter("b_total"))
	if err == nil || !strings.Contains(err.Error(), "second") {
		t.Fatalf("err = %v, want an error naming the owner", err)
	}
	if err := reg.Register(newCounter("c_total")); err != nil {
		t.Fatalf("c_total left registered after the failed call: %v", err)
	}
	if err := RegisterExclusive(nil, "none", newCounter("a_total")); err != nil {
		t.Fatalf("nil registerer: %v", err)
	}
}

func TestRegisterSharedReusesTheExistingCollector(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	first, err := RegisterShared(reg, newCounter("shared_total"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := RegisterShared(reg, newCounter("shared_total"))
	if err != nil {
		t.Fatal(err)
	}
	first.Inc()
	second.Inc()
	if got := testutil.ToFloat64(first); got != 2 {
		t.Fatalf("shared counter = %v, want 2 (both instances add to one series)", got)
	}
	// Same name, different type: a real conflict.
	if _, err := RegisterShared(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "shared_total", Help: "other"})); err == nil {
		t.Fatal("a conflicting collector was accepted")
	}
}
