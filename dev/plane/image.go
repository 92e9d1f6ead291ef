package plane

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// imageEntrypoint is the entrypoint binary of an image, pulled from the
// plane's registry as a node whose runtime mirrors every registry there
// would pull it (a reference naming another registry is rewritten to the
// plane's, as the ImageConfigs rewrite packages), and written into the
// plane's folder once per image: what a kubelet would run. A provider
// package's image is its runtime's; an upgrade therefore runs the new
// release's binary, and a Deployment the image a platform pushed.
func (p *Plane) imageEntrypoint(ctx context.Context, ref string) (string, error) {
	if p.registry == nil {
		return "", errors.Errorf("cannot pull %s: the plane runs no registry (it was started without a release)", ref)
	}
	pull := ref
	if !strings.HasPrefix(ref, p.registry.Host+"/") {
		_, rest, ok := strings.Cut(ref, "/")
		if !ok {
			return "", errors.Errorf("image reference %q names no registry", ref)
		}
		pull = p.registry.Host + "/" + rest
	}
	r, err := name.ParseReference(pull)
	if err != nil {
		return "", errors.Wrapf(err, "invalid image reference %q", ref)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithTransport(p.registry.client.Transport))
	if err != nil {
		return "", errors.Wrapf(err, "cannot pull %s (as %s) from the plane's registry", ref, pull)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", errors.Wrapf(err, "cannot read the digest of %s", ref)
	}
	repo, tag := r.Context().RepositoryStr(), r.Identifier()
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", errors.Wrapf(err, "cannot read the image configuration of %s", ref)
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return "", errors.Errorf("the image of %s has no entrypoint", ref)
	}
	entry := strings.TrimPrefix(path.Clean(cfg.Config.Entrypoint[0]), "/")
	out := filepath.Join(p.dir, "images", path.Base(repo)+"-"+tag+"-"+digest.Hex[:12], path.Base(entry))
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
