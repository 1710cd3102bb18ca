package orchestrator

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBudgetSettings(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (*Settings, error) {
		var s Settings
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		s.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return &s, s.Validate()
	}
	s, err := parse()
	if err != nil || s.BudgetsFile != "" || s.Options().BudgetReservationTTL != 15*time.Minute {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	good := filepath.Join(t.TempDir(), "budgets.yaml")
	if err := os.WriteFile(good, []byte("tenants:\n  acme:\n    usd_per_day: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := parse("-budgets-file="+good, "-budget-reservation-ttl=5m"); err != nil || s.Options().BudgetsFile != good || s.Options().BudgetReservationTTL != 5*time.Minute {
		t.Fatalf("good file: %+v, %v", s, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tenants:\n  acme:\n    usd_per_day: -5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		"-budgets-file=" + bad:              "setting budgets-file: " + bad + ": budgets file: tenants.acme.usd_per_day: must not be negative",
		"-budgets-file=" + bad + ".missing": "setting budgets-file",
		"-budget-reservation-ttl=10s":       "setting budget-reservation-ttl",
		"-budget-reservation-ttl=48h":       "setting budget-reservation-ttl",
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
