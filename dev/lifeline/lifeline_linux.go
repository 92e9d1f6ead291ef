package lifeline

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

const supported = true

func attach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

func killGroup(cmd *exec.Cmd, sig os.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return cmd.Process.Signal(sig)
	}
	return syscall.Kill(-cmd.Process.Pid, s)
}

// execWithLifeline arms the parent-death signal and becomes target; it
// returns an exit code only when that fails.
func execWithLifeline(target, parent string) int {
	// The parent-death signal belongs to the thread that sets it, and only
	// the thread that calls execve lives on as the new program: a goroutine
	// moved to another thread between the two would leave the binary
	// without its signal, and running after the plane died.
	runtime.LockOSThread()
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); e != 0 {
		fmt.Fprintf(os.Stderr, "lifeline: cannot arm the parent-death signal: %v\n", e)
		return 1
	}
	// The parent may have died before the signal was armed.
	if strconv.Itoa(os.Getppid()) != parent {
		return 1
	}
	args := append([]string{target}, os.Args[1:]...)
	err := syscall.Exec(target, args, os.Environ())
	fmt.Fprintf(os.Stderr, "lifeline: cannot execute %s: %v\n", target, err)
	return 1
}
