package splitrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baagent/baagent/internal/config"
)

func TestFirstAPIKey(t *testing.T) {
	for _, tc := range []struct {
		list, key, tenant string
		ok                bool
	}{
		{"dev-only-api-key-0000000000000001=default", "dev-only-api-key-0000000000000001", "default", true},
		{"# comment\n\n  0123456789abcdef = acme \nfedcba9876543210=other\n", "0123456789abcdef", "acme", true},
		{"short=acme,0123456789abcdef=second", "0123456789abcdef", "second", true},
		{"0123456789abcdef=", "", "", false},
		{"0123456789abcdef", "", "", false},
		{"", "", "", false},
	} {
		key, tenant, ok := FirstAPIKey(tc.list)
		if key != tc.key || tenant != tc.tenant || ok != tc.ok {
			t.Errorf("FirstAPIKey(%q) = %q, %q, %v; want %q, %q, %v", tc.list, key, tenant, ok, tc.key, tc.tenant, tc.ok)
		}
	}
}

func TestAPIKeyReadsTheGatewaysKeysFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-keys")
	if err := os.WriteFile(file, []byte("0123456789abcdef=acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Suite{Args: map[string][]string{config.TargetGateway: {"-target=gateway", "-api-keys-file=" + file}}}
	key, tenant, err := s.APIKey()
	if err != nil || key != "0123456789abcdef" || tenant != "acme" {
		t.Fatalf("APIKey() = %q, %q, %v", key, tenant, err)
	}
	s.Args[config.TargetGateway] = []string{"-api-keys=fedcba9876543210=inline"}
	if key, tenant, err = s.APIKey(); err != nil || key != "fedcba9876543210" || tenant != "inline" {
		t.Fatalf("APIKey() from -api-keys = %q, %q, %v", key, tenant, err)
	}
	s.Args[config.TargetGateway] = []string{"-target=gateway"}
	if _, _, err := s.APIKey(); err == nil {
		t.Fatal("APIKey() without keys succeeded")
	}
	s.Args[config.TargetGateway] = []string{"-api-keys-file=" + filepath.Join(t.TempDir(), "missing")}
	if _, _, err := s.APIKey(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("APIKey() with a missing file: %v", err)
	}
}

// FuzzFirstAPIKey: any input; a key found is a trimmed entry of the list,
// at least 16 characters, with a non-empty tenant.
func FuzzFirstAPIKey(f *testing.F) {
	for _, s := range []string{"dev-only-api-key-0000000000000001=default", "# c\n a=b ,0123456789abcdef=t", "=", ",,\n", "0123456789abcdef==x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		key, tenant, ok := FirstAPIKey(list)
		if !ok {
			if key != "" || tenant != "" {
				t.Fatalf("not ok but returned %q, %q", key, tenant)
			}
			return
		}
		if len(key) < 16 || tenant == "" || strings.TrimSpace(key) != key || strings.TrimSpace(tenant) != tenant {
			t.Fatalf("returned key %q tenant %q", key, tenant)
		}
		if strings.ContainsAny(key, ",\n") || strings.ContainsAny(tenant, ",\n") || strings.HasPrefix(key, "#") {
			t.Fatalf("returned key %q tenant %q across entries", key, tenant)
		}
		if !strings.Contains(list, key) || !strings.Contains(list, tenant) {
			t.Fatalf("key %q tenant %q not in %q", key, tenant, list)
		}
	})
}
