// Package tools finds what hack/ensure-tools.sh stages in a tools directory
// (by default .cache/tools of a checkout): the component binaries it builds
// from the Go module proxy, and the inputs the local management plane reads
// from other projects' Go modules — CAPI's and Crossplane's CRDs, the
// composition functions' package metadata and provider-kubernetes' CRDs.
// Everything is keyed by name and version:
//
//	<dir>/<name>-<version>/<name>          a binary (crossplane-v2.3.4/crossplane)
//	<dir>/<name>-<version>/package/        its package metadata and CRDs
//	<dir>/crds/<name>-<version>/           a module's CRDs (cluster-api-v1.14.2)
//	<dir>/assets/                          etcd, kube-apiserver, kube-controller-manager, kube-scheduler
//
// Nothing here needs a checkout or the Go toolchain: a binary built with
// -trimpath and run anywhere finds its inputs given the directory.
package tools

import (
	stderrors "errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// EnvDir is the environment variable naming the tools directory; the
// Makefile sets it.
const EnvDir = "CAPXP_TOOLS_CACHE"

// Dir is a tools directory as hack/ensure-tools.sh fills it.
type Dir string

// Default is $CAPXP_TOOLS_CACHE, or .cache/tools relative to the working
// directory (a checkout's root).
func Default() Dir {
	if d := os.Getenv(EnvDir); d != "" {
		return Dir(d)
	}
	return Dir(filepath.Join(".cache", "tools"))
}

// Binary is the path of a binary at a version.
func (d Dir) Binary(name, version string) (string, error) {
	p := filepath.Join(string(d), name+"-"+version, name)
	if err := executable(p); err != nil {
		return p, d.missing(name+" "+version+" (the binary "+p+")", name)
	}
	return p, nil
}

// Assets is the directory holding etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler side by side, as
// controller-runtime's envtest wants the first two.
func (d Dir) Assets() (string, error) {
	dir := filepath.Join(string(d), "assets")
	var missing []string
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := executable(filepath.Join(dir, bin)); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return dir, d.missing(strings.Join(missing, ", ")+" (in "+dir+")", missing...)
	}
	return dir, nil
}

// CRDs is the directory of CRDs staged from a module at a version:
// cluster-api (CAPI's core CRDs) or crossplane (Crossplane's).
func (d Dir) CRDs(name, version string) (string, error) {
	p := filepath.Join(string(d), "crds", name+"-"+version)
	if err := nonEmptyDir(p); err != nil {
		return p, d.missing(name+" "+version+"'s CRDs (the directory "+p+")", "crds")
	}
	return p, nil
}

// Stages is the directory of kwok stages staged beside kwok at a version.
func (d Dir) Stages(version string) (string, error) {
	p := filepath.Join(string(d), "kwok-"+version, "stages")
	if err := nonEmptyDir(p); err != nil {
		return p, d.missing("kwok "+version+"'s stages (the directory "+p+")", "kwok")
	}
	return p, nil
}

// Package is the package directory (crossplane.yaml, and crds/ for a
// provider) staged beside a function's or provider's binary.
func (d Dir) Package(name, version string) (string, error) {
	return d.PackageFile(name, version, "crossplane.yaml")
}

// PackageFile is the package directory staged for a name and version, which
// must hold a file (crossplane.yaml.tmpl for a provider family's template).
func (d Dir) PackageFile(name, version, file string) (string, error) {
	p := filepath.Join(string(d), name+"-"+version, "package")
	if _, err := os.Stat(filepath.Join(p, file)); err != nil {
		return p, d.missing(name+" "+version+"'s package metadata (the file "+filepath.Join(p, file)+")", name)
	}
	return p, nil
}

func (d Dir) missing(what string, tools ...string) error {
	return &MissingError{Dir: d, What: what, Tools: tools}
}

// MissingError says what a tools directory lacks and how to stage it.
type MissingError struct {
	Dir Dir
	// What is missing, with its path.
	What string
	// Tools are hack/ensure-tools.sh's arguments that stage it.
	Tools []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s is not in the tools directory %s: %s", e.What, abs(e.Dir), remedy(e.Dir, e.Tools))
}

// Missing combines errors: MissingErrors into one message listing
// everything missing and the one command that stages it all; other errors
// as they are (errors.Join-ed ones are unpacked). Nil when errs holds none.
func Missing(errs ...error) error {
	var missing []*MissingError
	var others []error
	errs = flatten(errs)
	for _, err := range errs {
		var m *MissingError
		switch {
		case err == nil:
		case errors.As(err, &m):
			missing = append(missing, m)
		default:
			others = append(others, err)
		}
	}
	if len(missing) == 0 {
		return stderrors.Join(others...)
	}
	if len(missing) == 1 && len(others) == 0 {
		return missing[0]
	}
	d := missing[0].Dir
	var b strings.Builder
	fmt.Fprintf(&b, "the tools directory %s lacks:", abs(d))
	var names []string
	for _, m := range missing {
		fmt.Fprintf(&b, "\n  - %s", m.What)
		for _, t := range m.Tools {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
	}
	fmt.Fprintf(&b, "\n%s", remedy(d, names))
	return stderrors.Join(append([]error{stderrors.New(b.String())}, others...)...)
}

// flatten unpacks errors.Join-ed errors.
func flatten(errs []error) []error {
	var out []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			out = append(out, flatten(j.Unwrap())...)
			continue
		}
		out = append(out, err)
	}
	return out
}

func remedy(d Dir, names []string) string {
	return fmt.Sprintf("in a CAPXP checkout, run `CAPXP_TOOLS_CACHE=%s hack/ensure-tools.sh %s` (`make tools` stages everything), or point the tools directory (--tools-dir, $%s) at one that has it",
		abs(d), strings.Join(names, " "), EnvDir)
}

func abs(d Dir) string {
	a, err := filepath.Abs(string(d))
	if err != nil {
		return string(d)
	}
	return a
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.Errorf("%s is not an executable file", p)
	}
	return nil
}

func nonEmptyDir(p string) error {
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return errors.Errorf("%s is empty", p)
	}
	return nil
}
