package xrd

import (
	"io/fs"
	"path"
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// TestOwnCRDLabels checks that the labels the manager restores are those the
// shipped CRDs carry, for every shipped CRD and no other.
func TestOwnCRDLabels(t *testing.T) {
	files, err := fs.Glob(capxp.Manifests, path.Join(capxp.CRDsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := OwnCRDLabels()
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := fs.ReadFile(capxp.Manifests, f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		seen[crd.Name] = true
		restores, ok := want[crd.Name]
		if !ok {
			t.Errorf("shipped CRD %s: OwnCRDLabels does not restore its labels", crd.Name)
			continue
		}
		if !labels.SelectorFromSet(restores).Matches(labels.Set(crd.Labels)) {
			t.Errorf("shipped CRD %s carries %v, but OwnCRDLabels restores %v", crd.Name, crd.Labels, restores)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("OwnCRDLabels names %s, which is not a shipped CRD", n)
		}
	}
}

func TestDecideOwnCRD(t *testing.T) {
	ns := metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "capxp-system", UID: "ns-uid"}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "elsewhere", UID: "other-uid"}
	want := map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}
	crd := func(l map[string]string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "namespacecredentials.infrastructure.cluster.x-k8s.io", Labels: l, OwnerReferences: owners}}
	}
	cases := map[string]struct {
		reason      string
		crd         *metav1.PartialObjectMetadata
		release     bool
		owners      []metav1.OwnerReference
		wantLabel   bool
		wantRelease *metav1.PartialObjectMetadata
	}{
		"Labelled": {
			reason: "A CRD carrying its labels needs nothing.",
			crd:    crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName, "other": "kept"}),
		},
		"Unlabelled": {
			reason:    "A CRD installed without labels (a package's) is labelled.",
			crd:       crd(nil),
			wantLabel: true,
		},
		"WrongValue": {
			reason:    "A label with another value is set again.",
			crd:       crd(map[string]string{infrav1.ProviderLabel: "someone-else"}),
			wantLabel: true,
		},
		"ReleasedFromClusterctl": {
			reason:      "clusterctl's label goes, and the manager's namespace owns the CRD.",
			crd:         crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName, infrav1.ClusterctlLabel: ""}),
			release:     true,
			owners:      []metav1.OwnerReference{ns},
			wantRelease: crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}, ns),
		},
		"AlreadyReleased": {
			reason:  "A released CRD owned by the namespace is left alone.",
			crd:     crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}, ns),
			release: true,
			owners:  []metav1.OwnerReference{ns},
		},
		"OwnersKept": {
			reason:      "Another owner stays beside the manager's namespace.",
			crd:         crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}, other),
			release:     true,
			owners:      []metav1.OwnerReference{ns},
			wantRelease: crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}, other, ns),
		},
		"NamespaceUnknown": {
			reason:      "Without the manager's namespace, clusterctl's label still goes.",
			crd:         crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName, infrav1.ClusterctlLabel: ""}),
			release:     true,
			wantRelease: crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}),
		},
		"NotReleased": {
			reason: "A CRD that clusterctl keeps has its label left.",
			crd:    crd(map[string]string{infrav1.ProviderLabel: infrav1.ProviderName, infrav1.ClusterctlLabel: ""}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decideOwnCRD(tc.crd, want, tc.release, tc.owners)
			if got.label != tc.wantLabel {
				t.Errorf("%s\nlabel: got %t, want %t", tc.reason, got.label, tc.wantLabel)
			}
			if diff := cmp.Diff(tc.wantRelease, got.release); diff != "" {
				t.Errorf("%s\nrelease -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
