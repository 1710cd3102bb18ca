package splitrun

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsAreDistinctBindableAndOutsideTheEphemeralRange(t *testing.T) {
	ports, err := FreePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice in %v", p, ports)
		}
		seen[p] = true
		if low > 2048 && (p < 1024 || p >= low) {
			t.Errorf("port %d is not in [1024, %d), below the ephemeral range", p, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d cannot be bound: %v", p, err)
			continue
		}
		l.Close()
	}
}
