package gateway

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Failed-auth throttling. Per-key rate limits cannot apply to a caller
// without a valid key, so invalid credentials are counted per client
// address instead: after limit of them within a window, every request from
// the address is answered ResourceExhausted (HTTP 429) until the window
// ends, without its credential being looked at. That bounds key guessing
// and the cost of refusing it. An IPv6 client is counted by its /64, which
// one host usually has whole. The map is keyed by client input, so it is
// bounded: expired windows are dropped when it is full, and failing that
// the address with the fewest failures (the least likely to be throttled).
// Behind a proxy every client shares the proxy's address.

type authThrottle struct {
	limit    int
	window   time.Duration
	maxAddrs int
	now      func() time.Time

	mu    sync.Mutex
	addrs map[netip.Prefix]*failures
}

type failures struct {
	start time.Time // the window's start: the first failure
	n     int
}

// newAuthThrottle returns a throttle, or nil (none) when limit is not
// positive.
func newAuthThrottle(limit int, window time.Duration, maxAddrs int, now func() time.Time) *authThrottle {
	if limit <= 0 {
		return nil
	}
	return &authThrottle{limit: limit, window: window, maxAddrs: max(maxAddrs, 1), now: now, addrs: map[netip.Prefix]*failures{}}
}

// clientPrefix is what failures are counted by: the IPv4 address, or the
// /64 of an IPv6 one. ok is false for peers without an IP address (Unix
// sockets), which are not throttled.
func clientPrefix(addr net.Addr) (netip.Prefix, bool) {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	ip = ip.Unmap()
	switch {
	case ip.Is4():
		return netip.PrefixFrom(ip, 32), true
	case ip.Is6():
		p, err := ip.Prefix(64)
		return p, err == nil
	}
	return netip.Prefix{}, false
}

// blocked reports whether p has used up its failures, and until when.
func (t *authThrottle) blocked(p netip.Prefix) (bool, time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.addrs[p]
	if f == nil {
		return false, 0
	}
	if left := f.start.Add(t.window).Sub(now); left > 0 {
		return f.n >= t.limit, left
	}
	delete(t.addrs, p)
	return false, 0
}

// fail counts a failure of p.
func (t *authThrottle) fail(p netip.Prefix) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.addrs[p]
	if f != nil && now.Sub(f.start) >= t.window {
		f = nil
	}
	if f == nil {
		if _, ok := t.addrs[p]; !ok && len(t.addrs) >= t.maxAddrs {
			t.evictLocked(now)
		}
		f = &failures{start: now}
		t.addrs[p] = f
	}
	f.n++
}

// evictLocked makes room: every expired window goes, and if none has,
// the address with the fewest failures (the oldest of those).
func (t *authThrottle) evictLocked(now time.Time) {
	var victim netip.Prefix
	var least *failures
	for p, f := range t.addrs {
		if now.Sub(f.start) >= t.window {
			delete(t.addrs, p)
			continue
		}
		if least == nil || f.n < least.n || (f.n == least.n && f.start.Before(least.start)) {
			victim, least = p, f
		}
	}
	if len(t.addrs) >= t.maxAddrs && least != nil {
		delete(t.addrs, victim)
	}
}

// size is the number of addresses tracked.
func (t *authThrottle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.addrs)
}

// throttled refuses a request from an address that has presented too
// many invalid credentials.
func (s *Server) throttled(api string, remote net.Addr) error {
	if s.throttle == nil {
		return nil
	}
	p, ok := clientPrefix(remote)
	if !ok {
		return nil
	}
	blocked, wait := s.throttle.blocked(p)
	if !blocked {
		return nil
	}
	s.edge.authThrottled.WithLabelValues(api).Inc()
	st := status.New(codes.ResourceExhausted, "too many failed authentications from this address: at most "+
		strconv.Itoa(s.throttle.limit)+" invalid API keys or stream tokens per "+s.throttle.window.String()+
		"; retry after "+wait.Round(time.Second).String())
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: "AUTH_THROTTLED", Domain: "baagent.dev"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)},
	); err == nil {
		st = d
	}
	return st.Err()
}

// authFailed counts an invalid credential from remote.
func (s *Server) authFailed(api string, remote net.Addr) {
	s.edge.authFailures.WithLabelValues(api).Inc()
	if s.throttle == nil {
		return
	}
	if p, ok := clientPrefix(remote); ok {
		s.throttle.fail(p)
	}
}
