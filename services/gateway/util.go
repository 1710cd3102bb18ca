package gateway

import (
	"errors"
	"net"
)

// isTimeout reports a write that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
