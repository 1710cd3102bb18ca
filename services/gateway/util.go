package gateway

import (
	"errors"
	"net"
	"time"
)

// isTimeout reports a read or write that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// orDefault is v, or def when v is zero. Negative values, which the
// options use for "no limit", are kept.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
