//go:build !(darwin || linux || openbsd)

package gateway

import (
	"net"
	"syscall"
)

// rawConn: writes that never block are not implemented on this platform,
// so every event is written by the client's own goroutine.
func rawConn(net.Conn) syscall.RawConn { return nil }

func tryWrite(syscall.RawConn, [][]byte) (int, error) { return 0, nil }
