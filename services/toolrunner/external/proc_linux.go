//go:build linux

package external

import "syscall"

// setParentDeathSignal makes the kernel kill the child if the toolrunner dies
// without a clean shutdown (SIGKILL, OOM), so MCP servers never outlive it.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
