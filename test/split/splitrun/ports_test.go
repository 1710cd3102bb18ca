package splitrun

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/baagent/baagent/internal/config"
)

func TestDefaultPortsAreThoseOfMakeRun(t *testing.T) {
	want := DefaultPorts()
	for _, svc := range config.Services {
		if want[GRPCListener(svc)] != config.DefaultPorts[svc] {
			t.Errorf("%s: gRPC port %d, want %d", svc, want[GRPCListener(svc)], config.DefaultPorts[svc])
		}
	}
	if want[ListenerHTTP] != 7780 || want[ListenerNATS] != 4222 || want[MetricsListener(config.TargetGateway)] != 9090 {
		t.Errorf("HTTP %d, NATS %d, gateway metrics %d; want 7780, 4222, 9090", want[ListenerHTTP], want[ListenerNATS], want[MetricsListener(config.TargetGateway)])
	}
	seen := map[int]string{}
	for name, p := range want {
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s both want port %d", name, other, p)
		}
		seen[p] = name
	}
	if len(want) != 2*len(config.Services)+3 {
		t.Errorf("%d listeners, want %d", len(want), 2*len(config.Services)+3)
	}
}

// wantFree returns listener names mapped to ports that are free now.
func wantFree(t *testing.T, names ...string) map[string]int {
	t.Helper()
	ports, err := FreePorts(len(names))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i, name := range names {
		want[name] = ports[i]
	}
	return want
}

func TestPlanPortsKeepsFreePortsAndMovesATakenOneAlone(t *testing.T) {
	want := wantFree(t, "a", "b", "c", "d")
	// Someone else holds b's port.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(want["b"]))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	got, moves, err := PlanPorts(want, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "c", "d"} {
		if got[name] != want[name] {
			t.Errorf("%s: port %d, want its own %d", name, got[name], want[name])
		}
	}
	if len(moves) != 1 || moves[0].Listener != "b" || moves[0].Want != want["b"] || moves[0].Got != got["b"] {
		t.Fatalf("moves %v, want b moved from %d to %d", moves, want["b"], got["b"])
	}
	if got["b"] == want["b"] || got["b"] == 0 {
		t.Fatalf("b got port %d, which is taken", got["b"])
	}
	for _, name := range []string{"a", "c", "d"} {
		if got[name] == got["b"] {
			t.Fatalf("b was given %s's port %d", name, got[name])
		}
	}
	if s := moves[0].String(); !strings.Contains(s, strconv.Itoa(want["b"])) || !strings.Contains(s, strconv.Itoa(got["b"])) || !strings.Contains(s, "in use") {
		t.Errorf("move reported as %q; want both ports and the reason", s)
	}
	// The planned ports were released: each can be bound.
	for name, p := range got {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("%s: port %d not released: %v", name, p, err)
			continue
		}
		l.Close()
	}
}

func TestPlanPortsRandomIgnoresTheWantedPorts(t *testing.T) {
	want := wantFree(t, "a", "b", "c")
	got, moves, err := PlanPorts(want, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 0 {
		t.Fatalf("random mode reported moves %v", moves)
	}
	if len(got) != 3 || got["a"] == got["b"] || got["b"] == got["c"] || got["a"] == got["c"] {
		t.Fatalf("ports %v: want three distinct", got)
	}
}

func TestPlanPortsRejectsBadWants(t *testing.T) {
	for _, want := range []map[string]int{
		{"a": 0},
		{"a": 70000},
		{"a": 7, "b": 7},
	} {
		if _, _, err := PlanPorts(want, false); err == nil {
			t.Errorf("PlanPorts(%v) succeeded", want)
		}
	}
}
