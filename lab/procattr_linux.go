package lab

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server when the process that started it (a
// test binary) dies, even by SIGKILL: no server outlives its test. (The kernel sends it
// when the starting thread ends; Go ends a thread only under runtime.LockOSThread, which
// nothing here uses.)
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
