// Package listener holds a TCP listener that a server binds before it
// serves, so that a process can bind all its ports and fail fast when one is
// taken, before starting anything. The gRPC and metrics servers share it.
package listener

import (
	"fmt"
	"net"
	"sync"
)

// Lazy is a listener on a fixed address, bound on the first Listen. The
// zero value is not usable; build one with New.
type Lazy struct {
	addr string
	what string // names the owner in errors, e.g. "metrics"

	mu  sync.Mutex
	lis net.Listener
}

// New returns an unbound Lazy for addr. what prefixes bind errors, as in
// "<what>: listen on <addr>: <err>".
func New(addr, what string) *Lazy {
	return &Lazy{addr: addr, what: what}
}

// Listen binds the address. The error names the owner and the address.
// Calling it again after a successful bind is a no-op.
func (l *Lazy) Listen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lis != nil {
		return nil
	}
	lis, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", l.what, l.addr, err)
	}
	l.lis = lis
	return nil
}

// Close releases the listener of a server that will not serve, e.g. when
// the process fails to start after binding its ports. Once Serve has begun
// it owns the listener; a Close after Serve returned is harmless.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lis == nil {
		return nil
	}
	err := l.lis.Close()
	l.lis = nil
	return err
}

// Addr is the bound address (useful with port 0), or nil before Listen.
func (l *Lazy) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lis == nil {
		return nil
	}
	return l.lis.Addr()
}

// Bound binds if needed and returns the listener, for Serve to hand to the
// underlying server.
func (l *Lazy) Bound() (net.Listener, error) {
	if err := l.Listen(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lis, nil
}
