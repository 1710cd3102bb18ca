//go:build darwin || linux || openbsd

package nbwrite

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Writer writes to a socket without ever waiting for it to drain.
type Writer struct{ rc syscall.RawConn }

// New returns a Writer for c, or nil when c is not a plain socket (TLS, a
// wrapper) or the platform has no such writes.
func New(c net.Conn) *Writer {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Writer{rc: rc}
}

// TryWrite writes frames with one write or writev that returns at once: a
// full socket buffer yields a short count (maybe 0) and no error. The
// runtime keeps the descriptor open for the call even if the connection is
// closed meanwhile, and a write deadline set on the connection and passed
// fails it.
func (w *Writer) TryWrite(frames [][]byte) (int, error) {
	var n int
	var werr error
	err := w.rc.Write(func(fd uintptr) bool {
		if len(frames) == 1 {
			n, werr = syscall.Write(int(fd), frames[0])
		} else {
			n, werr = unix.Writev(int(fd), frames)
		}
		return true // never wait for the socket to drain
	})
	if n < 0 {
		n = 0
	}
	if errors.Is(werr, syscall.EAGAIN) || errors.Is(werr, syscall.EINTR) {
		werr = nil
	}
	if err != nil {
		return n, err
	}
	return n, werr
}
