package topology

import "testing"

func TestEveryServiceHasADistinctDefaultPort(t *testing.T) {
	t.Parallel()
	seen := map[int]string{}
	for _, s := range Services {
		if !IsService(s) {
			t.Errorf("IsService(%q) = false", s)
		}
		p := DefaultPorts[s]
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s share port %d", s, other, p)
		}
		seen[p] = s
	}
	if IsService(All) || IsService("") {
		t.Error("all and the empty name are not services")
	}
	if got := DefaultDialAddr(Tokens); got != "localhost:7705" {
		t.Errorf("DefaultDialAddr(tokens) = %q", got)
	}
}
