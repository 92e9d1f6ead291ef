package plane

import (
	"archive/tar"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// packageEntrypoint is the entrypoint binary of the runtime image a
// mirrored package embeds (a Provider package's image is its runtime's),
// written into the plane's folder once per package version: what a kubelet
// would run from the image Crossplane's Deployment runtime names. An
// upgrade of the package therefore runs the new release's binary.
func (p *Plane) packageEntrypoint(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", errors.Wrapf(err, "invalid package reference %q", ref)
	}
	repo, tag := r.Context().Name(), r.Identifier()
	file := ""
	p.mirrorMu.Lock()
	for _, m := range p.mirrored {
		if m.ref == repo && m.tag == tag {
			file = m.xpkg
		}
	}
	p.mirrorMu.Unlock()
	if file == "" {
		return "", errors.Errorf("the plane's registry serves no package %s", ref)
	}
	img, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		return "", errors.Wrapf(err, "cannot read package %s", file)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", errors.Wrapf(err, "cannot read the image configuration of %s", ref)
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return "", errors.Errorf("the image of %s has no entrypoint", ref)
	}
	entry := strings.TrimPrefix(path.Clean(cfg.Config.Entrypoint[0]), "/")
	out := filepath.Join(p.dir, "images", path.Base(repo)+"-"+tag, path.Base(entry))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create the image folder")
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", errors.Errorf("the image of %s has no %s, its entrypoint", ref, cfg.Config.Entrypoint[0])
		}
		if err != nil {
			return "", errors.Wrapf(err, "cannot read the image of %s", ref)
		}
		if strings.TrimPrefix(path.Clean("/"+h.Name), "/") != entry {
			continue
		}
		tmp := out + ".tmp"
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o750) //nolint:gosec // the plane's own folder
		if err != nil {
			return "", errors.Wrap(err, "cannot write the image's entrypoint")
		}
		if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // the release's own image
			_ = f.Close()
			return "", errors.Wrapf(err, "cannot extract %s from %s", entry, ref)
		}
		if err := f.Close(); err != nil {
			return "", errors.Wrap(err, "cannot write the image's entrypoint")
		}
		return out, errors.Wrap(os.Rename(tmp, out), "cannot write the image's entrypoint")
	}
}
