package budget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

const goodFile = `
tenants:
  acme:
    usd_per_day: 10
    usd_per_month: 200
    tokens_per_day: 5000000
    max_steps_per_run: 40
    max_usd_per_run: 2
    keys:
      3f2a9c1b:
        usd_per_day: 1
  initech:
    tokens_per_day: 0
  empty:
`

func TestParseFile(t *testing.T) {
	f, err := ParseFile([]byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Scope]*baagentv1.Budget{
		{Tenant: "acme"}:                    {UsdPerDay: f64(10), UsdPerMonth: f64(200), TokensPerDay: i64(5000000), MaxStepsPerRun: i32(40), MaxUsdPerRun: f64(2)},
		{Tenant: "acme", KeyID: "3f2a9c1b"}: {UsdPerDay: f64(1)},
		{Tenant: "initech"}:                 {TokensPerDay: i64(0)},
	}
	if f.Len() != len(want) {
		t.Fatalf("%d budgets (%v), want %d", f.Len(), f.Scopes(), len(want))
	}
	for s, b := range want {
		if !proto.Equal(f.Get(s), b) {
			t.Errorf("%s: %v, want %v", s, f.Get(s), b)
		}
	}
	if f.Get(Scope{Tenant: "empty"}) != nil || f.Get(Scope{Tenant: "nobody"}) != nil {
		t.Error("a tenant without limits has a budget")
	}
	if s := f.Scopes(); s[0] != (Scope{Tenant: "acme"}) || s[1].KeyID != "3f2a9c1b" {
		t.Errorf("Scopes = %v, want sorted", s)
	}
}

func TestParseFileRefuses(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown top field", "tenant:\n  acme: {}\n", "field tenant not found"},
		{"unknown limit", "tenants:\n  acme:\n    usd_per_week: 3\n", "field usd_per_week not found"},
		{"unknown key field", "tenants:\n  acme:\n    keys:\n      3f2a9c1b:\n        keys: {}\n", "field keys not found"},
		{"negative", "tenants:\n  acme:\n    usd_per_day: -1\n", "tenants.acme.usd_per_day: must not be negative"},
		{"nan", "tenants:\n  acme:\n    usd_per_month: .nan\n", "tenants.acme.usd_per_month: must be a finite number"},
		{"too large", "tenants:\n  acme:\n    max_usd_per_run: 1e12\n", "tenants.acme.max_usd_per_run: must be at most"},
		{"zero steps", "tenants:\n  acme:\n    max_steps_per_run: 0\n", "tenants.acme.max_steps_per_run: want 1 to"},
		{"negative tokens", "tenants:\n  acme:\n    tokens_per_day: -5\n", "tenants.acme.tokens_per_day"},
		{"string value", "tenants:\n  acme:\n    usd_per_day: lots\n", "cannot unmarshal"},
		{"bad tenant", "tenants:\n  ac.me:\n    usd_per_day: 1\n", "tenants.ac.me"},
		{"bad key id", "tenants:\n  acme:\n    keys:\n      sk-live-123:\n        usd_per_day: 1\n", "tenants.acme.keys.sk-live-123: must be 8 lowercase hex"},
		{"upper-case key id", "tenants:\n  acme:\n    keys:\n      3F2A9C1B:\n        usd_per_day: 1\n", "lowercase hex"},
		{"duplicate tenant", "tenants:\n  acme:\n    usd_per_day: 1\n  acme:\n    usd_per_day: 2\n", "already defined"},
		{"two documents", "tenants: {}\n---\ntenants: {}\n", "one YAML document"},
		{"not a mapping", "- a\n", "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	f, err := LoadFile("")
	if err != nil || f.Len() != 0 {
		t.Fatalf("LoadFile(\"\") = %v, %v", f, err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file loaded")
	}
	p := filepath.Join(t.TempDir(), "budgets.yaml")
	if err := os.WriteFile(p, []byte(goodFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := LoadFile(p); err != nil || f.Len() != 3 {
		t.Fatalf("LoadFile = %v budgets, %v", f.Len(), err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a file over the limit: %v", err)
	}
}

// FuzzBudgetsFile: any input parses or is refused without a panic, and
// whatever parses holds only valid budgets of valid scopes.
func FuzzBudgetsFile(f *testing.F) {
	for _, s := range []string{goodFile, "", "tenants: {}\n", "tenants:\n  a:\n    usd_per_day: 1e308\n",
		"tenants:\n  a:\n    keys:\n      00000000: {max_steps_per_run: 3}\n", "tenants:\n  a: &x {usd_per_day: 1}\n  b: *x\n",
		"tenants:\n  a:\n    usd_per_day: 0x10\n", "tenants: [1, 2]\n", "{tenants: {a: {tokens_per_day: 9223372036854775807}}}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data)
		if err != nil {
			return
		}
		for _, s := range file.Scopes() {
			if err := CheckScope(s); err != nil {
				t.Fatalf("parsed an invalid scope %v: %v", s, err)
			}
			b := file.Get(s)
			if Empty(b) {
				t.Fatalf("%v has an empty budget", s)
			}
			var e validateErrors
			Validate(&e.Errors, "", b)
			if e.Len() > 0 {
				t.Fatalf("%v has an invalid budget %v", s, b)
			}
		}
	})
}
