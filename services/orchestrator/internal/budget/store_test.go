package budget

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

type validateErrors struct{ validate.Errors }

func TestStoreAPIEntriesWinOverTheFile(t *testing.T) {
	kv, _ := buckets(t)
	file, err := ParseFile([]byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(kv, file, -1)
	ctx := testCtx(t)

	e, err := st.Entry(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_FILE || e.GetBudget().GetUsdPerDay() != 10 || e.GetApiBudget() != nil {
		t.Fatalf("file entry = %v", e)
	}
	set := &baagentv1.Budget{UsdPerMonth: f64(50)}
	e, err = st.Set(ctx, acme, set)
	if err != nil {
		t.Fatal(err)
	}
	if e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_API || !proto.Equal(e.GetBudget(), set) || e.GetFileBudget().GetUsdPerDay() != 10 || e.GetUpdatedAt() == nil {
		t.Fatalf("after Set = %v", e)
	}
	// The API's entry replaces the file's whole: no usd_per_day now.
	if b, err := st.Effective(ctx, acme); err != nil || b.UsdPerDay != nil || b.GetUsdPerMonth() != 50 {
		t.Fatalf("Effective = %v, %v", b, err)
	}
	// An empty API budget lifts the file's limits.
	if e, err = st.Set(ctx, acme, &baagentv1.Budget{}); err != nil || !Empty(e.GetBudget()) || e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_API {
		t.Fatalf("empty Set = %v, %v", e, err)
	}
	if e, err = st.Clear(ctx, acme); err != nil || e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_FILE || e.GetBudget().GetUsdPerDay() != 10 {
		t.Fatalf("after Clear = %v, %v", e, err)
	}
	// Clearing what is not there is fine.
	nobody := Scope{Tenant: "nobody", KeyID: "89abcdef"}
	if e, err = st.Clear(ctx, nobody); err != nil || e.GetSource() != baagentv1.BudgetSource_BUDGET_SOURCE_NONE {
		t.Fatalf("Clear of nothing = %v, %v", e, err)
	}
	if _, err := st.Entry(ctx, Scope{Tenant: "a.b"}); err == nil {
		t.Fatal("an invalid tenant was read")
	}
}

func TestStoreCachesForItsTTL(t *testing.T) {
	kv, _ := buckets(t)
	st := NewStore(kv, nil, time.Hour)
	other := NewStore(kv, nil, time.Hour) // another replica
	ctx := testCtx(t)
	if b, err := st.Effective(ctx, acme); err != nil || !Empty(b) {
		t.Fatalf("Effective = %v, %v", b, err)
	}
	if _, err := other.Set(ctx, acme, &baagentv1.Budget{UsdPerDay: f64(3)}); err != nil {
		t.Fatal(err)
	}
	// The cached read stands until its TTL (here an hour)...
	if b, _ := st.Effective(ctx, acme); !Empty(b) {
		t.Fatalf("cached Effective = %v", b)
	}
	// ...but the replica that wrote sees its write at once.
	if b, _ := other.Effective(ctx, acme); b.GetUsdPerDay() != 3 {
		t.Fatalf("writer's Effective = %v", b)
	}
}

func TestValidateNamesFields(t *testing.T) {
	var e validate.Errors
	Validate(&e, "budget", &baagentv1.Budget{UsdPerDay: f64(-1), TokensPerDay: i64(-1), MaxStepsPerRun: i32(0), MaxUsdPerRun: f64(2e9)})
	got := map[string]bool{}
	for _, v := range e.Violations() {
		got[v.GetField()] = true
	}
	for _, f := range []string{"budget.usd_per_day", "budget.tokens_per_day", "budget.max_steps_per_run", "budget.max_usd_per_run"} {
		if !got[f] {
			t.Errorf("no violation for %s (got %v)", f, got)
		}
	}
	if err := CheckKeyID("0123abcd"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "0123abc", "0123abcde", "0123ABCD", "0123abcg"} {
		if CheckKeyID(bad) == nil {
			t.Errorf("CheckKeyID(%q) accepted", bad)
		}
	}
}
