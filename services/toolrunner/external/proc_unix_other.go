//go:build unix && !linux

package external

import "syscall"

// setParentDeathSignal has no equivalent outside Linux; a clean shutdown
// still kills the children.
func setParentDeathSignal(*syscall.SysProcAttr) {}
