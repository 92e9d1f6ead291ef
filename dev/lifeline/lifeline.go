// Package lifeline ties the lives of child processes to the process that
// starts them, so that a plane killed outright (SIGKILL, a panic in a
// goroutine, a write to a closed pipe) leaves no component running.
//
// On Linux a child gets the parent-death signal SIGKILL and a process group of
// its own, which Stop-style code can signal as a whole. Binaries started by
// code that lets us set neither (controller-runtime's envtest starts etcd and
// kube-apiserver itself) are started through a link to this program instead:
// Wrap makes the link, and Main, called first in main (and TestMain), turns
// this program, started under such a link, into the real binary with the
// parent-death signal armed.
//
// The kernel sends the parent-death signal when the thread that forked the
// child ends; the Go runtime does not end threads unless a goroutine locked to
// one exits, which the plane does not do.
package lifeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	// envParent holds the pid of the process that made the links; a link
	// started by another process is run as this program, not as a link.
	envParent = "CAPXP_LIFELINE_PARENT"
	// targetSuffix names the file beside a link that holds the real
	// binary's path.
	targetSuffix = ".lifeline-target"
)

var armed atomic.Bool

// Main must be the first call in main (or TestMain) of a program that uses
// Wrap. When this program was started through a link Wrap made, it arms the
// parent-death signal and executes the real binary in its place, never
// returning; otherwise it returns at once.
func Main() {
	armed.Store(true)
	parent := os.Getenv(envParent)
	if parent == "" || len(os.Args) == 0 {
		return
	}
	target, err := os.ReadFile(os.Args[0] + targetSuffix)
	if err != nil {
		return // started normally, not through a link
	}
	os.Exit(execWithLifeline(string(target), parent))
}

// Armed reports whether Main was called in this process, so that Wrap's
// links work.
func Armed() bool { return armed.Load() }

// Wrap makes a link in dir through which bin starts with the parent-death
// signal armed, and returns its path; bin itself when Main was not called
// or on systems without a parent-death signal.
func Wrap(dir, bin string) (string, error) {
	if !Armed() || !supported {
		return bin, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", errors.Wrap(err, "cannot find this program to start children through")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", errors.Wrapf(err, "cannot resolve %s", bin)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errors.Wrap(err, "cannot create the links' directory")
	}
	link := filepath.Join(dir, filepath.Base(bin))
	_ = os.Remove(link)
	if err := os.Symlink(self, link); err != nil {
		return "", errors.Wrapf(err, "cannot link %s", link)
	}
	if err := os.WriteFile(link+targetSuffix, []byte(abs), 0o600); err != nil {
		return "", errors.Wrapf(err, "cannot write the target of %s", link)
	}
	if err := os.Setenv(envParent, strconv.Itoa(os.Getpid())); err != nil {
		return "", errors.Wrap(err, "cannot set "+envParent)
	}
	return link, nil
}

// Attach makes a command's process die with this one and leads a process
// group of its own (so that an interrupt of the terminal reaches it only
// through whoever stops it, in order, and KillGroup reaches its children
// too). Call it before Start.
func Attach(cmd *exec.Cmd) { attach(cmd) }

// KillGroup signals the process group a started, attached command leads.
func KillGroup(cmd *exec.Cmd, sig os.Signal) error { return killGroup(cmd, sig) }
