package grpcclient

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/resolver"
)

// StaticScheme is the scheme of a target that lists every replica of a
// peer: `static:///host1:port1,host2:port2`. Calls are spread round-robin
// over the listed addresses, and a replica that is down is skipped until it
// is back, without DNS (a headless Service does the same with
// `dns:///name:port`). The list is fixed for the connection's life.
const StaticScheme = "static"

// staticPrefix starts every static target: no authority, the list as path.
const staticPrefix = StaticScheme + ":///"

// IsStaticTarget reports whether target uses the static scheme
// ("static://…"; "static:7702" is host "static", port 7702).
func IsStaticTarget(target string) bool {
	return strings.HasPrefix(target, StaticScheme+"://")
}

// ParseStaticTarget returns the addresses of a `static:///a,b` target. Each
// must be host:port with a numeric port 1–65535 (IPv6 in brackets); the
// list must not be empty nor name an address twice.
func ParseStaticTarget(target string) ([]string, error) {
	if !strings.HasPrefix(target, staticPrefix) {
		return nil, fmt.Errorf("static target %q: want %shost:port[,host:port…]", target, staticPrefix)
	}
	return parseStaticList(strings.TrimPrefix(target, staticPrefix))
}

// parseStaticList parses the comma-separated host:port list of a static
// target.
func parseStaticList(list string) ([]string, error) {
	if list == "" {
		return nil, fmt.Errorf("static target: no address: want %shost:port[,host:port…]", staticPrefix)
	}
	parts := strings.Split(list, ",")
	seen := make(map[string]bool, len(parts))
	addrs := make([]string, 0, len(parts))
	for i, addr := range parts {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || strings.ContainsAny(addr, " \t/") {
			return nil, fmt.Errorf("static target: address %d is %q, want host:port", i+1, addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("static target: port of %q must be a number 1-65535", addr)
		}
		if seen[addr] {
			return nil, fmt.Errorf("static target: %q is listed twice", addr)
		}
		seen[addr] = true
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// staticBuilder builds the resolver of static targets. It is passed to
// each connection with grpc.WithResolvers rather than registered globally.
type staticBuilder struct{}

func (staticBuilder) Scheme() string { return StaticScheme }

// Build hands the listed addresses to the balancer once, one endpoint per
// address, so that round_robin keeps a subchannel to each replica and
// reconnects to one that went away.
func (staticBuilder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	if host := target.URL.Host; host != "" {
		return nil, fmt.Errorf("static target: unexpected authority %q, want %shost:port[,host:port…]", host, staticPrefix)
	}
	addrs, err := parseStaticList(target.Endpoint())
	if err != nil {
		return nil, err
	}
	state := resolver.State{
		Addresses: make([]resolver.Address, len(addrs)),
		Endpoints: make([]resolver.Endpoint, len(addrs)),
	}
	for i, a := range addrs {
		state.Addresses[i] = resolver.Address{Addr: a}
		state.Endpoints[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	if err := cc.UpdateState(state); err != nil {
		return nil, fmt.Errorf("static target: %w", err)
	}
	return staticResolver{}, nil
}

// staticResolver has nothing to resolve again: the list never changes.
type staticResolver struct{}

func (staticResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (staticResolver) Close()                                {}
