//go:build !(darwin || linux || openbsd)

package nbwrite

import "net"

// Writer: writes that never block are not implemented on this platform.
type Writer struct{}

// New returns nil here: every event is written by the client's own
// goroutine.
func New(net.Conn) *Writer { return nil }

// TryWrite writes nothing.
func (*Writer) TryWrite([][]byte) (int, error) { return 0, nil }
