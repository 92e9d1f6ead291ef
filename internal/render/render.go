// Package render runs Crossplane's real composition engine: the crossplane
// binary's `internal render` command, which runs Crossplane's XR reconciler
// against an in-memory client, with the real composition function binaries
// serving on local sockets. Both are built from the Go module proxy by
// hack/ensure-tools.sh.
package render

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	renderv1alpha1 "github.com/crossplane/crossplane/v2/proto/render/v1alpha1"
)

// exitPipelineFatal is the crossplane binary's exit code for a pipeline that
// returned a fatal result; its output is still written.
const exitPipelineFatal = 3

// Function is a composition function binary and the name Compositions call it
// by (the name Crossplane gives the installed package). With Address, the
// function already runs there (a gRPC target, insecure) and is not started.
type Function struct {
	Name    string
	Binary  string
	Address string
}

// Engine renders XRs with the crossplane binary and running functions.
type Engine struct {
	crossplane string
	dir        string
	fns        []*renderv1alpha1.FunctionInput
	procs      []*exec.Cmd
}

// Start starts every function on a unix socket and waits until each accepts
// connections. Stop the engine to stop them.
func Start(ctx context.Context, crossplane string, fns ...Function) (*Engine, error) {
	if _, err := os.Stat(crossplane); err != nil {
		return nil, errors.Wrap(err, "crossplane binary is missing: run `make tools`")
	}
	// Socket paths must stay short (108 bytes), so not under t.TempDir.
	dir, err := os.MkdirTemp("", "capxp-render")
	if err != nil {
		return nil, errors.Wrap(err, "cannot create socket directory")
	}
	e := &Engine{crossplane: crossplane, dir: dir}
	for i, fn := range fns {
		if fn.Address != "" {
			if err := waitFor(ctx, "tcp", fn.Address, 10*time.Second); err != nil {
				_ = e.Stop()
				return nil, errors.Wrapf(err, "function %s", fn.Name)
			}
			e.fns = append(e.fns, &renderv1alpha1.FunctionInput{Name: fn.Name, Address: fn.Address})
			continue
		}
		if _, err := os.Stat(fn.Binary); err != nil {
			_ = e.Stop()
			return nil, errors.Wrapf(err, "function %s is missing: run `make tools`", fn.Name)
		}
		sock := filepath.Join(dir, fmt.Sprintf("fn-%d.sock", i))
		cmd := exec.CommandContext(ctx, fn.Binary, "--insecure", "--network=unix", "--address="+sock) //nolint:gosec // binaries built by hack/ensure-tools.sh.
		// Functions log every call; keep it beside the socket for debugging.
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("fn-%d.log", i)))
		if err != nil {
			_ = e.Stop()
			return nil, errors.Wrap(err, "cannot create function log")
		}
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		_ = log.Close()
		if err != nil {
			_ = e.Stop()
			return nil, errors.Wrapf(err, "cannot start function %s", fn.Name)
		}
		e.procs = append(e.procs, cmd)
		if err := waitFor(ctx, "unix", sock, 30*time.Second); err != nil {
			_ = e.Stop()
			return nil, errors.Wrapf(err, "function %s did not start", fn.Name)
		}
		e.fns = append(e.fns, &renderv1alpha1.FunctionInput{Name: fn.Name, Address: "unix://" + sock})
	}
	return e, nil
}

// waitFor waits until something accepts connections at an address.
func waitFor(ctx context.Context, network, address string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, network, address)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return errors.Wrapf(err, "nothing listens on %s after %s", address, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the functions and removes their sockets.
func (e *Engine) Stop() error {
	for _, p := range e.procs {
		_ = p.Process.Signal(os.Interrupt)
	}
	for _, p := range e.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	return os.RemoveAll(e.dir)
}

// Input is one render: an XR (with the status of the previous round), its
// Composition and XRD, and the composed resources as the providers observe
// them.
type Input struct {
	XR          *unstructured.Unstructured
	Composition *unstructured.Unstructured
	XRD         *unstructured.Unstructured
	Observed    []*unstructured.Unstructured
	// Extra objects in the render's world (a bootstrap Secret, for example).
	Extra []*unstructured.Unstructured
}

// Event is an event Crossplane recorded on the XR.
type Event struct {
	Type, Reason, Message string
}

// Output is what Crossplane would write: the XR with its status, the desired
// composed resources, and the events it recorded.
type Output struct {
	XR       *unstructured.Unstructured
	Composed []*unstructured.Unstructured
	Events   []Event
}

// Render runs one reconcile of the XR. A pipeline that returns a fatal result
// yields its partial output and an error carrying Crossplane's message.
func (e *Engine) Render(ctx context.Context, in Input) (*Output, error) {
	ci := &renderv1alpha1.CompositeInput{Functions: e.fns}
	var err error
	if ci.CompositeResource, err = toStruct(in.XR); err != nil {
		return nil, err
	}
	if ci.Composition, err = toStruct(in.Composition); err != nil {
		return nil, err
	}
	if in.XRD != nil {
		if ci.CompositeResourceDefinition, err = toStruct(in.XRD); err != nil {
			return nil, err
		}
	}
	for _, o := range in.Observed {
		s, err := toStruct(o)
		if err != nil {
			return nil, err
		}
		ci.ObservedResources = append(ci.ObservedResources, s)
	}
	for _, o := range in.Extra {
		s, err := toStruct(o)
		if err != nil {
			return nil, err
		}
		ci.RequiredResources = append(ci.RequiredResources, s)
	}
	req, err := proto.Marshal(&renderv1alpha1.RenderRequest{
		Meta:  &renderv1alpha1.RequestMeta{},
		Input: &renderv1alpha1.RenderRequest_Composite{Composite: ci},
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot marshal render request")
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e.crossplane, "internal", "render") //nolint:gosec // binary built by hack/ensure-tools.sh.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &stdout, &stderr
	runErr := cmd.Run()
	var ee *exec.ExitError
	if runErr != nil && (!errors.As(runErr, &ee) || ee.ExitCode() != exitPipelineFatal) {
		return nil, errors.Errorf("crossplane internal render: %v: %s", runErr, strings.TrimSpace(stderr.String()))
	}

	rsp := &renderv1alpha1.RenderResponse{}
	if err := proto.Unmarshal(stdout.Bytes(), rsp); err != nil {
		return nil, errors.Wrap(err, "cannot unmarshal render response")
	}
	co := rsp.GetComposite()
	if co == nil {
		return nil, errors.Errorf("render response has no composite output: %s", strings.TrimSpace(stderr.String()))
	}
	out := &Output{XR: fromStruct(co.GetCompositeResource())}
	for _, s := range co.GetComposedResources() {
		out.Composed = append(out.Composed, fromStruct(s))
	}
	for _, ev := range co.GetEvents() {
		out.Events = append(out.Events, Event{Type: ev.GetType(), Reason: ev.GetReason(), Message: ev.GetMessage()})
	}
	if runErr != nil {
		return out, errors.Errorf("composition pipeline failed: %s", strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func toStruct(u *unstructured.Unstructured) (*structpb.Struct, error) {
	s, err := structpb.NewStruct(u.Object)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot convert %s %s to protobuf", u.GetKind(), u.GetName())
	}
	return s, nil
}

func fromStruct(s *structpb.Struct) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: s.AsMap()}
}

// Targets are the gRPC targets of the running functions by name, for
// Functions annotated with the crossplane CLI's Development runtime.
func (e *Engine) Targets() map[string]string {
	out := make(map[string]string, len(e.fns))
	for _, f := range e.fns {
		out[f.GetName()] = f.GetAddress()
	}
	return out
}
