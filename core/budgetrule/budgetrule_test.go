package budgetrule

import (
	"math"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestCheck(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	s := func(v int32) *int32 { return &v }
	if v := Check(&baagentv1.Budget{UsdPerDay: f(0), UsdPerMonth: f(MaxUSD), TokensPerDay: i(0), MaxStepsPerRun: s(1), MaxUsdPerRun: f(0.5)}); len(v) != 0 {
		t.Fatalf("valid budget: %v", v)
	}
	if v := Check(nil); len(v) != 0 {
		t.Fatalf("nil budget: %v", v)
	}
	if v := Check(&baagentv1.Budget{}); len(v) != 0 {
		t.Fatalf("empty budget: %v", v)
	}
	bad := Check(&baagentv1.Budget{UsdPerDay: f(-0.01), UsdPerMonth: f(math.Inf(1)), TokensPerDay: i(-1), MaxStepsPerRun: s(0), MaxUsdPerRun: f(MaxUSD * 2)})
	want := []string{USDPerDay, USDPerMonth, MaxUSDPerRun, TokensPerDay, MaxStepsPerRun}
	if len(bad) != len(want) {
		t.Fatalf("violations %v, want one for each of %v", bad, want)
	}
	for k, v := range bad {
		if v.Field != want[k] || v.Description == "" {
			t.Errorf("violation %d = %v, want %s", k, v, want[k])
		}
	}
}

func TestCheckKeyID(t *testing.T) {
	if err := CheckKeyID("0123abcd"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "0123abc", "0123abcde", "0123ABCD", "0123abcg", "sk-live-"} {
		if CheckKeyID(bad) == nil {
			t.Errorf("CheckKeyID(%q) accepted", bad)
		}
	}
}
