package release

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The manager image: the static capxp binary alone on an empty base, run as
// a non-root user; no shell, no package manager, nothing else to patch. The
// Function package's image is the same, with the function's binary.
const (
	// ImageEntrypoint is where the binary lives in the manager image.
	ImageEntrypoint = "/capxp"
	// FunctionImageEntrypoint is where the function's binary lives in its
	// image.
	FunctionImageEntrypoint = "/function-asg-instances"
	// ImageUser is the image's numeric user and group (the distroless
	// "nonroot" ids), so runAsNonRoot holds without a passwd file.
	ImageUser = "65532:65532"
	// ImageTarball and ImageLayout are the image's files in a release.
	ImageTarball = "capxp-manager-image.tar"
	ImageLayout  = "capxp-manager-image.oci"
	// FunctionImageTarball is the runtime image of the Function package,
	// serving function-asg-instances.
	FunctionImageTarball = "capxp-function-image.tar"
)

// Image builds the manager image from a static linux capxp binary of an
// architecture. Its entrypoint runs the manager, so a Crossplane package
// runtime that passes no arguments starts it too.
func Image(binary, arch string) (v1.Image, error) {
	return image(binary, ImageEntrypoint, arch, "manager")
}

// FunctionImage is the Function package's runtime image, from a static linux
// function-asg-instances binary: a Crossplane function runtime passes no
// arguments, and it serves with none.
func FunctionImage(binary, arch string) (v1.Image, error) {
	return image(binary, FunctionImageEntrypoint, arch)
}

// image is a binary alone at entrypoint, run with cmd.
func image(binary, entrypoint, arch string, cmd ...string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read the binary %s", binary)
	}
	layerTar := &bytes.Buffer{}
	tw := tar.NewWriter(layerTar)
	// A fixed time keeps the image reproducible from the same binary.
	epoch := time.Unix(0, 0).UTC()
	if err := tw.WriteHeader(&tar.Header{Name: entrypoint[1:], Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return nil, errors.Wrap(err, "cannot write the image layer")
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, errors.Wrap(err, "cannot write the image layer")
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, "cannot write the image layer")
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot make the image layer")
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, errors.Wrap(err, "cannot add the image layer")
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the image configuration")
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.Cmd = cmd
	cfg.Config.User = ImageUser
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/capxp/cluster-api-provider-crossplane"}
	img, err = mutate.ConfigFile(img, cfg)
	return img, errors.Wrap(err, "cannot set the image configuration")
}

// Binaries are the static linux binaries a release's images hold.
type Binaries struct {
	// Manager is capxp's; Function is function-asg-instances'.
	Manager, Function string
}

// WriteImage builds the manager image of a release and writes it into dir as
// an OCI layout and as a tarball `docker load` reads, tagged with the
// release's image reference, which it returns; and the Function package's
// image as a tarball, which only that package embeds.
func WriteImage(dir string, o Options, bins Binaries, arch string) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	img, err := Image(bins.Manager, arch)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(o.Image())
	if err != nil {
		return "", errors.Wrapf(err, "invalid image reference %q", o.Image())
	}
	if err := tarball.WriteToFile(filepath.Join(dir, ImageTarball), ref, img); err != nil {
		return "", errors.Wrap(err, "cannot write the image tarball")
	}
	lp := filepath.Join(dir, ImageLayout)
	if err := os.RemoveAll(lp); err != nil {
		return "", errors.Wrap(err, "cannot replace the image layout")
	}
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return "", errors.Wrap(err, "cannot write the image layout")
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return "", errors.Wrap(err, "cannot write the image layout")
	}
	fn, err := FunctionImage(bins.Function, arch)
	if err != nil {
		return "", err
	}
	// Only embedded in the Function package, which names its own
	// reference; the tag is the package's.
	fref, err := name.NewTag(o.FunctionPackage() + ":" + o.Version)
	if err != nil {
		return "", errors.Wrapf(err, "invalid function image reference %q", o.FunctionPackage())
	}
	if err := tarball.WriteToFile(filepath.Join(dir, FunctionImageTarball), fref, fn); err != nil {
		return "", errors.Wrap(err, "cannot write the function image tarball")
	}
	return ref.String(), nil
}
