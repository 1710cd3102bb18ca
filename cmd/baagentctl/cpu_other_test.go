//go:build !unix

package main

import "time"

// selfCPU is the CPU time this process has used: unknown here.
func selfCPU() time.Duration { return -1 }
