package splitrun

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/baagent/baagent/internal/config"
)

// Listener names the loopback listeners of a split suite, as keys of
// Suite.Ports and in Move.
const (
	// ListenerHTTP is the gateway's HTTP listener.
	ListenerHTTP = "gateway-http"
	// ListenerNATS and ListenerNATSMonitor are the NATS server's client
	// and monitoring listeners.
	ListenerNATS        = "nats"
	ListenerNATSMonitor = "nats-monitor"
)

// GRPCListener and MetricsListener name a service's gRPC and /metrics
// listeners, e.g. "gateway" and "gateway-metrics".
func GRPCListener(svc string) string    { return svc }
func MetricsListener(svc string) string { return svc + "-metrics" }

// DefaultNATSMonitorPort is nats-server's usual monitoring port.
const DefaultNATSMonitorPort = 8222

// DefaultNATSPort is the port of `make run`'s embedded NATS.
const DefaultNATSPort = 4222

// DefaultPorts returns the port every listener of the split suite wants:
// the ports of `make run` (gRPC 7700-7706, HTTP 7780, NATS 4222), and for
// the seven /metrics listeners, which `make run` shares in one on 9090, 9090
// for the gateway and the next ones in the order of the gRPC ports
// (orchestrator 9091 ... tokens 9095, memory 9096); NATS monitoring on 8222.
func DefaultPorts() map[string]int {
	want := map[string]int{
		ListenerHTTP:        config.DefaultGatewayHTTPPort,
		ListenerNATS:        DefaultNATSPort,
		ListenerNATSMonitor: DefaultNATSMonitorPort,
	}
	for _, svc := range config.Services {
		want[GRPCListener(svc)] = config.DefaultPorts[svc]
		want[MetricsListener(svc)] = config.DefaultMetricsPort + config.DefaultPorts[svc] - config.DefaultPorts[config.TargetGateway]
	}
	return want
}

// Move records a listener that could not have the port it wanted.
type Move struct {
	Listener string
	Want     int
	Got      int
	// Err is why the wanted port could not be bound (usually "address
	// already in use").
	Err error
}

func (m Move) String() string {
	return fmt.Sprintf("%s port %d is taken (%v); using %d", Describe(m.Listener), m.Want, m.Err, m.Got)
}

// Describe names a listener for people, e.g. "gateway gRPC".
func Describe(listener string) string {
	switch listener {
	case ListenerHTTP:
		return "gateway HTTP"
	case ListenerNATS:
		return "NATS"
	case ListenerNATSMonitor:
		return "NATS monitoring"
	}
	if svc, ok := strings.CutSuffix(listener, "-metrics"); ok {
		return svc + " metrics"
	}
	return listener + " gRPC"
}

// PlanPorts assigns a loopback port to each listener in want. With random
// false, a listener gets the port it wants when that port can be bound on
// 127.0.0.1, and otherwise a free one, recorded in the returned moves
// (sorted by listener); every other listener keeps its port. With random
// true every listener gets a free port (FreePorts) and nothing is reported
// as moved. The ports are distinct and released before PlanPorts returns,
// so another process could take one before the suite binds it; that shows
// as a bind error naming the setting.
func PlanPorts(want map[string]int, random bool) (map[string]int, []Move, error) {
	names := sortedNames(want)
	got := make(map[string]int, len(want))
	if random {
		ports, err := FreePorts(len(names))
		if err != nil {
			return nil, nil, err
		}
		for i, name := range names {
			got[name] = ports[i]
		}
		return got, nil, nil
	}
	// Hold every port that could be bound until the moved ones have theirs,
	// so that a moved listener is never given another one's port.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var moves []Move
	seen := map[int]string{}
	for _, name := range names {
		p := want[name]
		if p <= 0 || p > 65535 {
			return nil, nil, fmt.Errorf("listener %s: port %d out of range", name, p)
		}
		if other, dup := seen[p]; dup {
			return nil, nil, fmt.Errorf("listeners %s and %s both want port %d", other, name, p)
		}
		seen[p] = name
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			moves = append(moves, Move{Listener: name, Want: p, Err: bindCause(err)})
			continue
		}
		held = append(held, l)
		got[name] = p
	}
	if len(moves) == 0 {
		return got, nil, nil
	}
	ports, err := FreePorts(len(moves))
	if err != nil {
		return nil, nil, err
	}
	for i := range moves {
		moves[i].Got = ports[i]
		got[moves[i].Listener] = ports[i]
	}
	return got, moves, nil
}

// bindCause strips net.OpError's "listen tcp 127.0.0.1:7700:" prefix, which
// Move.String already says.
func bindCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

func sortedNames(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}
