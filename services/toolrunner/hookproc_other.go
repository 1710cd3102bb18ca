//go:build !unix

package toolrunner

import "os/exec"

// hookProcessGroup leaves the default: exec.CommandContext kills the
// process at the hook's timeout.
func hookProcessGroup(*exec.Cmd) {}

func hookKillGroup(*exec.Cmd) {}
