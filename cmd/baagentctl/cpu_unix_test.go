//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU is the CPU time (user and system) this process has used, or -1.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
