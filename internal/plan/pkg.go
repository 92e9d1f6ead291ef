package plan

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// Replacing is what installing objs does to the live objects of their names:
// Crossplane's package manager replaces each whole, where plan merges a
// change onto the live object. Each is turned into the merge patch from the
// live object to it (its spec, labels and annotations; null for what it
// drops), so that plan's merge gives the object as installed. One that does
// not exist yet is created as it is.
func Replacing(ctx context.Context, r client.Reader, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := r.Get(ctx, client.ObjectKeyFromObject(o), live)
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, o)
			continue
		case err != nil:
			return nil, xperrors.Wrapf(err, "cannot get %s %s", o.GetKind(), o.GetName())
		}
		from, err := json.Marshal(replaced(live))
		if err != nil {
			return nil, err
		}
		to, err := json.Marshal(replaced(o))
		if err != nil {
			return nil, err
		}
		patch, err := jsonpatch.CreateMergePatch(from, to)
		if err != nil {
			return nil, xperrors.Wrapf(err, "cannot compare %s %s with the live one", o.GetKind(), o.GetName())
		}
		p := &unstructured.Unstructured{Object: map[string]any{}}
		if err := json.Unmarshal(patch, &p.Object); err != nil {
			return nil, err
		}
		meta, _ := p.Object["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"], meta["namespace"] = o.GetName(), o.GetNamespace()
		p.Object["metadata"] = meta
		p.SetGroupVersionKind(o.GroupVersionKind())
		out = append(out, p)
	}
	return out, nil
}

// replaced is what an installed object's replacement sets: its spec, labels
// and annotations.
func replaced(u *unstructured.Unstructured) map[string]any {
	return map[string]any{
		fieldSpec:     u.Object[fieldSpec],
		fieldMetadata: map[string]any{fieldLabels: u.GetLabels(), fieldAnnotations: u.GetAnnotations()},
	}
}
