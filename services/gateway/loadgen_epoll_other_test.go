//go:build !linux

package gateway

import (
	"context"
	"errors"
)

// epollLoadgen: elsewhere the fan-out clients read with one goroutine per
// stream.
const epollLoadgen = false

func runFanoutEpoll(context.Context, string, string, int, bool) error {
	return errors.New("the epoll load generator runs on Linux only")
}
