// Package cliarchive writes the release's archive of the capxp command
// line: capxp with what its composition check runs and reads, so that the
// check needs no checkout.
package cliarchive

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

// ToolsDir is the folder beside capxp in the archive that holds what
// `capxp composition check` runs and reads, as hack/ensure-tools.sh stages
// it: capxp uses it when it is there.
const ToolsDir = "tools"

// File is the name of the archive of a release version for Linux on arch.
func File(version, arch string) string {
	return "capxp-" + version + "-linux-" + arch + ".tar.gz"
}

// Write writes the archive of the capxp command line into dir and
// returns its path: in one folder, capxp and function-asg-instances (bins),
// and in tools/ the crossplane binary of the render engine, the
// Configuration's functions and its providers' CRDs from the tools
// directory d (which must hold all of them, built for arch), so that
// `capxp composition check` runs from the archive alone, without a
// checkout.
func Write(dir, version string, bins release.Binaries, d tools.Dir, arch string) (string, error) {
	engine, err := compcheck.EngineBinaries(d)
	if err != nil {
		return "", err
	}
	crdDirs, err := compcheck.ProviderCRDDirs(d)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, File(version, arch))
	f, err := os.Create(file)
	if err != nil {
		return "", errors.Wrap(err, "cannot create the CLI archive")
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(zw)
	root := strings.TrimSuffix(File(version, arch), ".tar.gz")
	// add writes the file src into the archive at name, below root.
	add := func(name, src string, mode int64) error {
		in, err := os.Open(src)
		if err != nil {
			return errors.Wrapf(err, "cannot read %s", src)
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return errors.Wrapf(err, "cannot read %s", src)
		}
		if err := tw.WriteHeader(&tar.Header{Name: path.Join(root, name), Mode: mode, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return errors.Wrap(err, "cannot write the CLI archive")
		}
		_, err = io.Copy(tw, in)
		return errors.Wrapf(err, "cannot archive %s", src)
	}
	// staged is a path of the tools directory as the archive's tools/ holds it.
	staged := func(p string) (string, error) {
		rel, err := filepath.Rel(string(d), p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", errors.Errorf("%s is not in the tools directory %s", p, d)
		}
		return path.Join(ToolsDir, filepath.ToSlash(rel)), nil
	}
	for _, b := range []string{bins.Manager, bins.Function} {
		if err := add(filepath.Base(b), b, 0o755); err != nil {
			return "", err
		}
	}
	for _, b := range engine {
		name, err := staged(b)
		if err != nil {
			return "", err
		}
		if err := add(name, b, 0o755); err != nil {
			return "", err
		}
	}
	for _, dir := range crdDirs {
		crds, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return "", errors.Wrapf(err, "cannot list %s", dir)
		}
		for _, c := range crds {
			name, err := staged(c)
			if err != nil {
				return "", err
			}
			if err := add(name, c, 0o644); err != nil {
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", errors.Wrap(err, "cannot write the CLI archive")
	}
	if err := zw.Close(); err != nil {
		return "", errors.Wrap(err, "cannot write the CLI archive")
	}
	return file, errors.Wrap(f.Close(), "cannot write the CLI archive")
}
