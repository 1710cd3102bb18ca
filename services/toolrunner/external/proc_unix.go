//go:build unix

package external

import (
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group, so that killGroup also
// reaches the grandchildren a launcher starts (`npx` runs `node`).
func isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setParentDeathSignal(cmd.SysProcAttr)
}

// killGroup kills the child's whole process group. It is called after the
// child has been closed (or has died), to leave no orphan behind.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH when nothing is left
}
