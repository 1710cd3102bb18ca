//go:build !(darwin || linux || openbsd)

package nbwrite

import "net"

// Writer is never made on this platform: it has no writev through
// golang.org/x/sys/unix, so the gateway writes every event from the
// client's own goroutine here, which is the path every platform takes for
// a client that is not caught up.
type Writer struct{}

// New returns nil: the caller keeps to its own writes.
func New(net.Conn) *Writer { return nil }

// TryWrite writes nothing; it is never called, since New returns nil.
func (*Writer) TryWrite([][]byte) (int, error) { return 0, nil }
