//go:build darwin || linux || openbsd

package gateway

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConn returns the connection's file descriptor access for writes that
// must not block, or nil when the connection has none (TLS, a wrapper).
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// tryWrite writes frames to the socket with one write or writev that
// returns at once: a full socket buffer yields a short count, not a wait.
// The runtime keeps the descriptor open for the call even if the
// connection is closed meanwhile.
func tryWrite(rc syscall.RawConn, frames [][]byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
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
