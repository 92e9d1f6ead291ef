package plan

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	xperrors "github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// packageFile is the file of a Crossplane package (.xpkg) that holds its
// objects: its metadata, then every object it installs.
const packageFile = "package.yaml"

// Package is what a Crossplane Configuration package (.xpkg) would install,
// as plan reads it: the Compositions it brings (each a change planned as a
// new revision of the Composition of its name) and the names of its XRDs,
// which plan does not plan.
type Package struct {
	// Name is the Configuration's name, from its metadata.
	Name         string
	Compositions []*unstructured.Unstructured
	XRDs         []string
}

// ReadPackage reads a package file as `crossplane xpkg build` writes it: an
// OCI image tarball one of whose layers holds package.yaml.
func ReadPackage(path string) (*Package, error) {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return nil, xperrors.Wrapf(err, "cannot read package %s (an .xpkg file, as crossplane xpkg build writes it)", path)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, xperrors.Wrapf(err, "cannot read the layers of package %s", path)
	}
	for _, l := range layers {
		raw, err := fileInLayer(l.Uncompressed, packageFile)
		if err != nil {
			return nil, xperrors.Wrapf(err, "cannot read package %s", path)
		}
		if raw != nil {
			return parsePackage(path, raw)
		}
	}
	return nil, fmt.Errorf("package %s holds no %s: not a Crossplane package", path, packageFile)
}

// fileInLayer is a file of an image layer, nil when the layer has none.
func fileInLayer(open func() (io.ReadCloser, error), name string) ([]byte, error) {
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name || h.Name == "./"+name {
			return io.ReadAll(tr)
		}
	}
}

// parsePackage reads package.yaml: the Configuration's metadata first, then
// its objects.
func parsePackage(path string, raw []byte) (*Package, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	p := &Package{}
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, xperrors.Wrapf(err, "cannot decode the objects of package %s", path)
		}
		if len(u.Object) == 0 {
			continue
		}
		switch gk := u.GroupVersionKind().GroupKind(); {
		case gk.Group == "meta.pkg.crossplane.io" && gk.Kind == "Configuration":
			p.Name = u.GetName()
		case gk.Group == "meta.pkg.crossplane.io":
			return nil, fmt.Errorf("package %s is a %s package, not a Configuration", path, gk.Kind)
		case gk.Group == "apiextensions.crossplane.io" && gk.Kind == "Composition":
			p.Compositions = append(p.Compositions, u)
		case gk.Group == "apiextensions.crossplane.io" && gk.Kind == "CompositeResourceDefinition":
			p.XRDs = append(p.XRDs, u.GetName())
		}
	}
	if p.Name == "" {
		return nil, fmt.Errorf("package %s has no Configuration metadata", path)
	}
	return p, nil
}
