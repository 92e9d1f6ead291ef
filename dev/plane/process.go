package plane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
)

// process is a component the plane runs as a child process, its output in a
// log file of the plane's directory.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	// dir, bin, env and args start it again (restart).
	dir, bin  string
	env, args []string
	// ended is set when the plane stops or kills it on purpose.
	ended atomic.Bool
}

// startProcess starts a binary with arguments and extra environment.
func startProcess(dir, name, bin string, env []string, args ...string) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, errors.Wrapf(err, "%s is missing", name)
	}
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot create the log of %s", name)
	}
	// Not tied to a context: Stop ends it, in order, and lifeline when this
	// process dies.
	cmd := exec.Command(bin, args...) //nolint:noctx // Stop ends it, in order.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: an interrupt of the plane reaches it through
	// Stop, in order, not all at once from the terminal. And it dies with
	// the plane's process, however that ends.
	lifeline.Attach(cmd)
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, errors.Wrapf(err, "cannot start %s", name)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{}), dir: dir, bin: bin, env: env, args: args}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop interrupts the process's group and waits for the process, killing
// the group after a grace period; whatever the process left in its group is
// killed once it has exited. (A process that exited before stop is left
// alone: its id may belong to another process group by now.)
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
		return
	}
	p.ended.Store(true)
	_ = lifeline.KillGroup(p.cmd, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = lifeline.KillGroup(p.cmd, syscall.SIGKILL)
	<-p.done
}

// kill kills the process's group outright and waits for the process.
func (p *process) kill() {
	if done, _ := p.exited(); done {
		return
	}
	p.ended.Store(true)
	_ = lifeline.KillGroup(p.cmd, syscall.SIGKILL)
	<-p.done
}

// crashed reports whether the process ended without being stopped or
// killed, and how.
func (p *process) crashed() (bool, error) {
	done, err := p.exited()
	return done && !p.ended.Load(), err
}

// restart starts the same command again once the process has ended, its
// output appended to the same log.
func (p *process) restart() (*process, error) {
	if done, _ := p.exited(); !done {
		return nil, errors.Errorf("%s is running", p.name)
	}
	return startProcess(p.dir, p.name, p.bin, p.env, p.args...)
}

// tail is the end of the process's log, for error messages.
func (p *process) tail() string {
	raw, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// waitHealthy polls a health URL until it answers 200, failing early when
// the process exits.
func (p *process) waitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	return p.waitFor(ctx, timeout, func() bool {
		rsp, err := http.Get(url) //nolint:gosec,noctx // loopback health probe.
		if err != nil {
			return false
		}
		_ = rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK
	})
}

// waitFor polls a condition until it holds, failing early when the process
// exits.
func (p *process) waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		if done, err := p.exited(); done {
			return errors.Errorf("%s exited (%v); its log %s ends:\n%s", p.name, err, p.log, p.tail())
		}
		if time.Now().After(deadline) {
			return errors.Errorf("%s not ready after %s; its log %s ends:\n%s", p.name, timeout, p.log, p.tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePort finds a free loopback TCP port for a component to listen on.
//
// It picks below the kernel's ephemeral range: a port the kernel hands out
// for bind(0) is handed out again, between our check and the component's
// bind, as the local end of any outgoing connection (the plane makes
// thousands), and the component then fails with "address already in use"
// (it failed CI once). A port is never handed out twice by one process.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	low, high := portRange()
	for range 1000 {
		port := low + ports.rand.IntN(high-low)
		if ports.given[port] {
			continue
		}
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", hostPort(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports.given[port] = true
		return port, nil
	}
	return 0, errors.Errorf("cannot find a free port between %d and %d", low, high)
}

var ports = struct {
	sync.Mutex
	given map[int]bool
	rand  *rand.Rand
}{given: map[int]bool{}, rand: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))} //nolint:gosec // not for security

// portRange is where freePort picks: from 10000 to the start of the kernel's
// ephemeral range (32768 unless configured otherwise).
func portRange() (low, high int) {
	low, high = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > low+1000 {
				high = n
			}
		}
	}
	return low, high
}

func hostPort(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
