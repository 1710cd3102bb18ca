//go:build unix

package toolrunner

import (
	"os/exec"
	"syscall"
)

// hookProcessGroup starts a command hook in its own process group and
// makes its context's end kill the whole group, so that a hook that
// started children leaves none behind at its timeout.
func hookProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		hookKillGroup(cmd)
		return nil
	}
}

// hookKillGroup kills what is left of the command's process group.
func hookKillGroup(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH when nothing is left
}
