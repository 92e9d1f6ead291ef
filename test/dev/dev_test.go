// Package dev checks that `capxp-dev`, the binary behind `make dev`, leaves
// no process behind however it ends: interrupted from the terminal, sent
// SIGTERM, killed outright, or interrupted after its stdout closed (as
// `make dev | tee log` then Ctrl-C does). It counts what a user would: the
// processes of the plane still running, and whether the next `capxp-dev`
// starts.
//
// It runs its own planes, so it cannot share the machine with another one
// (provider-kubernetes holds fixed ports): `make test` runs it after the
// end-to-end tests, one package at a time.
package dev

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// envMark is set, with a value of its own, in each capxp-dev the test
// starts; every process of that plane inherits it.
const envMark = "CAPXP_DEV_TEST_MARK"

// minProcesses is fewer than a plane runs once every component is started
// (two etcds and API servers, kube-controller-manager, provider-kubernetes,
// Crossplane, two functions and the manager, beside capxp-dev): a count
// below it means the test is not seeing the plane's processes.
const minProcesses = 10

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capxp-dev-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "bin")
	build := exec.CommandContext(context.Background(), "go", "build", "-o", bin+string(filepath.Separator), "./cmd/capxp", "./cmd/capxp-dev") //nolint:gosec // fixed arguments.
	build.Dir = envtest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot build capxp and capxp-dev: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestNoProcessLeftBehind ends capxp-dev each way a user might, once every
// component of its plane runs, and finds none of them left; each next
// capxp-dev starting proves the ports the last one held are free again.
func TestNoProcessLeftBehind(t *testing.T) {
	ends := []struct {
		name string
		// graceful ends stop the plane in order and exit 0.
		graceful bool
		end      func(t *testing.T, r *run)
	}{
		{"KilledOutright", false, func(t *testing.T, r *run) { r.signal(t, syscall.SIGKILL) }},
		{"StdoutClosedThenCtrlC", true, func(t *testing.T, r *run) {
			_ = r.stdout.Close()
			// A write to the closed pipe must fail rather than kill it.
			time.Sleep(2 * time.Second)
			r.ctrlC(t)
		}},
		{"SIGTERM", true, func(t *testing.T, r *run) { r.signal(t, syscall.SIGTERM) }},
		{"CtrlC", true, func(t *testing.T, r *run) { r.ctrlC(t) }},
		{"CtrlCTwice", false, func(t *testing.T, r *run) {
			r.ctrlC(t)
			time.Sleep(time.Second)
			r.ctrlC(t)
		}},
	}
	for _, e := range ends {
		if !t.Run(e.name, func(t *testing.T) {
			r := start(t)
			seen := r.waitForPlane(t, 3*time.Minute)
			if len(seen) < minProcesses {
				t.Fatalf("saw %d processes of the plane, want at least %d: %v", len(seen), minProcesses, seen)
			}
			e.end(t, r)
			err := r.wait(2 * time.Minute)
			if e.graceful {
				if err != nil {
					t.Errorf("capxp-dev did not exit cleanly: %v\n%s", err, r.output())
				}
				if !strings.Contains(r.output(), "stopped; logs are in") && e.name != "StdoutClosedThenCtrlC" {
					t.Errorf("capxp-dev did not say it stopped the plane:\n%s", r.output())
				}
			}
			left := r.waitNoProcesses(15 * time.Second)
			if len(left) > 0 {
				t.Fatalf("%d of the plane's %d processes still run after capxp-dev ended: %v", len(left), len(seen), left)
			}
			t.Logf("capxp-dev ended (%v); none of its %d processes is left", err, len(seen))
		}) {
			return // the next start would fail for this one's leftovers
		}
	}
	// The last one's fixed ports are free too (the next start proved it for
	// the others).
	for _, port := range []int{8080, 9443} {
		if c, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			_ = c.Close()
			t.Errorf("port %d still answers after the last capxp-dev ended", port)
		}
	}
}

// run is one capxp-dev.
type run struct {
	cmd    *exec.Cmd
	mark   string
	stdout io.ReadCloser
	out    *lockedBuffer
	lines  chan string
	done   chan error
	// known are the processes ever seen with the mark.
	known []process
}

func start(t *testing.T) *run {
	t.Helper()
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "capxp-dev"), //nolint:noctx,gosec // ended by the test, each way in turn; the binary it built.
		"--dir="+filepath.Join(dir, "plane"), "--tools-dir="+envtest.ToolsDir(), "--manager-binary="+filepath.Join(bin, "capxp"))
	r := &run{cmd: cmd, mark: hex.EncodeToString(token), out: &lockedBuffer{}, lines: make(chan string, 1024), done: make(chan error, 1)}
	cmd.Env = append(os.Environ(), envMark+"="+r.mark)
	// Its own process group, as a shell gives a foreground job: Ctrl-C is
	// SIGINT to that group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = r.out
	// A pipe of the test's own, which Wait leaves alone: closing its read end
	// is what a `| tee` that died does.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, r.stdout = pw, pr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	go func() {
		s := bufio.NewScanner(r.stdout)
		for s.Scan() {
			_, _ = r.out.Write([]byte(s.Text() + "\n"))
			select {
			case r.lines <- s.Text():
			default:
			}
		}
	}()
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		// However the test ends, nothing of this plane is left.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, p := range r.processes() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
	return r
}

// waitForPlane waits until capxp-dev has started every component and
// applies the example, and returns the plane's processes then.
func (r *run) waitForPlane(t *testing.T, within time.Duration) []process {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-r.lines:
			if strings.Contains(l, "applying examples/local") {
				return r.processes()
			}
		case err := <-r.done:
			r.done <- err
			t.Fatalf("capxp-dev exited before its plane was up (%v):\n%s", err, r.output())
		case <-deadline:
			t.Fatalf("capxp-dev's plane was not up after %s:\n%s", within, r.output())
		}
	}
}

// ctrlC does what a terminal does on Ctrl-C: SIGINT to the foreground
// process group.
func (r *run) ctrlC(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
}

func (r *run) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

func (r *run) wait(within time.Duration) error {
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(within):
		return fmt.Errorf("still running after %s", within)
	}
}

// waitNoProcesses waits until none of the plane's processes runs, and
// returns those that still do at the end. A process counts until it is a
// zombie or gone: one being killed loses its environment (and so the mark)
// before it closes its sockets, so every process once seen with the mark is
// followed by its process ID.
func (r *run) waitNoProcesses(within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		r.processes()
		var live []int
		for _, p := range r.known {
			if p.alive() {
				live = append(live, p.pid)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			left := make([]string, 0, len(live))
			for _, pid := range live {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " ")))
			}
			return left
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// process is one process of a plane: its ID and its start time, which tell
// it from a later process given the same ID.
type process struct {
	pid   int
	start string
}

// stat reads a process's state and start time from /proc/<pid>/stat.
func stat(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	// The command name, in parentheses, may hold spaces: fields are counted
	// after its closing one. State is field 3, start time field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}

// alive reports whether the process still runs: it exists, is the same
// process, and is neither a zombie nor dead (those hold no port and no
// memory). A killed process's main thread can be a zombie while its other
// threads are still exiting, and they still hold its files (its listening
// sockets among them) until the last one is gone: a zombie with threads
// left is alive.
func (p process) alive() bool {
	state, start, ok := stat(p.pid)
	if !ok || start != p.start || state == "X" {
		return false
	}
	if state != "Z" {
		return true
	}
	threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid))
	return err == nil && len(threads) > 1
}

// processes are the live processes carrying this run's mark (a zombie's
// environment is gone, and so is the mark); each is remembered in known.
func (r *run) processes() []process {
	entries, _ := os.ReadDir("/proc")
	want := []byte(envMark + "=" + r.mark + "\x00")
	var procs []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		if _, start, ok := stat(pid); ok {
			p := process{pid: pid, start: start}
			procs = append(procs, p)
			if !slices.Contains(r.known, p) {
				r.known = append(r.known, p)
			}
		}
	}
	return procs
}

func (r *run) output() string { return r.out.String() }

// lockedBuffer collects output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
