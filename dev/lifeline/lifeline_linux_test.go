package lifeline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

const (
	envHelper = "LIFELINE_TEST_HELPER"
	// envReport makes this test binary print its parent-death signal and
	// exit.
	envReport = "LIFELINE_TEST_REPORT"
)

// init reports the parent-death signal when asked to, but only in the binary
// a link became. It must read it here: the signal belongs to the thread that
// executed the binary, which is the main thread, and only package
// initialization is sure to run there; threads the Go runtime starts later
// begin without it (the kernel still signals the whole process when the
// parent dies, through the main thread's setting).
func init() {
	if os.Getenv(envReport) == "" {
		return
	}
	if _, err := os.Stat(os.Args[0] + targetSuffix); err == nil {
		return // the link itself: Main executes the binary
	}
	var got int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&got)), 0); e != 0 {
		fmt.Fprintln(os.Stderr, e)
		os.Exit(1)
	}
	fmt.Println(got)
	os.Exit(0)
}

func TestMain(m *testing.M) {
	Main()
	if dir := os.Getenv(envHelper); dir != "" {
		if err := helper(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// TestEveryLinkedStartKeepsTheSignal starts a binary through a link many
// times and finds the parent-death signal armed in each: it must survive the
// exec on whichever thread the Go runtime runs it.
func TestEveryLinkedStartKeepsTheSignal(t *testing.T) {
	link, err := Wrap(t.TempDir(), os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		cmd := exec.CommandContext(t.Context(), link)
		cmd.Env = append(os.Environ(), envReport+"=1", "GOMAXPROCS=4")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if got := strings.TrimSpace(string(out)); got != strconv.Itoa(int(syscall.SIGKILL)) {
			t.Fatalf("start %d runs with parent-death signal %q, want %d (SIGKILL)", i, got, syscall.SIGKILL)
		}
	}
}

// helper plays a plane: it starts sleep through a link and sleep attached,
// prints both pids and waits to be killed.
func helper(dir string) error {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return err
	}
	link, err := Wrap(dir, sleep)
	if err != nil {
		return err
	}
	// Both run until the test kills this process outright.
	linked := exec.CommandContext(context.Background(), link, "300")
	attached := exec.CommandContext(context.Background(), sleep, "301")
	Attach(attached)
	for _, c := range []*exec.Cmd{linked, attached} {
		if err := c.Start(); err != nil {
			return err
		}
	}
	fmt.Println(linked.Process.Pid, attached.Process.Pid)
	select {}
}

// TestChildrenDieWithParent kills a parent outright and finds both its
// children gone: the one started through a link (as envtest's etcd and
// kube-apiserver are) and the attached one.
func TestChildrenDieWithParent(t *testing.T) {
	parent := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$") //nolint:gosec // this test binary.
	parent.Env = append(os.Environ(), envHelper+"="+t.TempDir())
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		t.Fatalf("the helper printed no pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	// The linked child runs sleep itself, with its own arguments.
	cmdline := waitFor(t, func() (string, bool) {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
		s := strings.ReplaceAll(string(raw), "\x00", " ")
		return s, err == nil && strings.Contains(s, "sleep 300")
	})
	if filepath.Base(strings.Fields(cmdline)[0]) != "sleep" {
		t.Errorf("the linked child runs %q, want sleep 300", cmdline)
	}

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for _, pid := range pids {
		waitFor(t, func() (string, bool) { return fmt.Sprintf("process %d still runs", pid), !alive(pid) })
	}
}

func waitFor(t *testing.T, ok func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, done := ok()
		if done {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal(s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive: the process exists and is not a zombie (an orphan may stay one
// where nothing reaps it, as in some containers).
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}
