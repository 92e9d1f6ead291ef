package contracts

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443"}
users:
- name: u
  user: {token: "t0"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

// The control plane's kubeconfig reaches CAPI's <cluster>-kubeconfig
// Secret only from the Secret the composition names in the XR's namespace,
// only when it is usable, and never over a Secret that is not the XR's.
func TestControlPlanePublish(t *testing.T) {
	xrUID := types.UID("xr-uid")
	src := func(key, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "eks-conn"}, Data: map[string][]byte{key: []byte(value)}}
	}
	target := func(owner types.UID, value string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-kubeconfig"},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte(value)}}
		if owner != "" {
			s.Labels = map[string]string{clusterv1.ClusterNameLabel: "demo"}
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "CrossplaneControlPlane",
				Name: "demo", UID: owner, Controller: ptr.To(true)}}
		}
		return s
	}
	locked := func(name string) *infrav1.NamespaceCredentials {
		return &infrav1.NamespaceCredentials{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: infrav1.NamespaceCredentialsName},
			Spec: infrav1.NamespaceCredentialsSpec{Locked: []infrav1.LockedObject{{Kind: "Secret", Name: name}}}}
	}
	cases := map[string]struct {
		reason   string
		objs     []client.Object
		want     string // the verdict's reason; empty when none
		wantData string // what <cluster>-kubeconfig holds after; empty when absent
		event    string
	}{
		"Written": {
			reason: "a usable kubeconfig is copied into the cluster's kubeconfig Secret",
			objs:   []client.Object{src("kubeconfig", testKubeconfig)}, wantData: testKubeconfig, event: "KubeconfigWritten",
		},
		"Rotated": {
			reason: "a changed kubeconfig replaces the one the XR wrote",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), target(xrUID, "old")}, wantData: testKubeconfig, event: "KubeconfigRotated",
		},
		"Unchanged": {
			reason: "the same kubeconfig is not written again",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), target(xrUID, testKubeconfig)}, wantData: testKubeconfig,
		},
		"SourceMissing": {
			reason: "until the composition's Secret exists, the control plane is not initialized",
			want:   infrav1.WaitingForKubeconfigReason,
		},
		"KeyMissing": {
			reason: "a Secret without the named key is waited for",
			objs:   []client.Object{src("other", testKubeconfig)}, want: infrav1.WaitingForKubeconfigReason,
		},
		"NotAKubeconfig": {
			reason: "a Secret that holds no usable kubeconfig is reported, not copied",
			objs:   []client.Object{src("kubeconfig", "apiVersion: v1\nkind: Config\n")}, want: infrav1.InvalidKubeconfigReason,
		},
		"TokenFile": {
			reason: "a kubeconfig naming a file of the host that reads it is refused, the file never opened, the message quoting only the kubeconfig",
			objs:   []client.Object{src("kubeconfig", strings.Replace(testKubeconfig, `{token: "t0"}`, `{tokenFile: /dev/zero}`, 1))}, want: infrav1.InvalidKubeconfigReason,
		},
		"LockedChanged": {
			reason: "a locked <cluster>-kubeconfig Secret (a ProviderConfig's credentials) is not rewritten from a tenant's source",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), target(xrUID, "old"), locked("demo-kubeconfig")}, want: infrav1.KubeconfigLockedReason, wantData: "old",
		},
		"LockedMissing": {
			reason: "nor created while locked",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), locked("demo-kubeconfig")}, want: infrav1.KubeconfigLockedReason,
		},
		"LockedUnchanged": {
			reason: "a locked Secret that already holds the kubeconfig is the XR's, as written",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), target(xrUID, testKubeconfig), locked("demo-kubeconfig")}, wantData: testKubeconfig,
		},
		"SomeoneElses": {
			reason: "a <cluster>-kubeconfig Secret the XR does not control is never overwritten",
			objs:   []client.Object{src("kubeconfig", testKubeconfig), target("", "theirs")}, want: infrav1.KubeconfigNotControlledReason, wantData: "theirs",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(tc.objs...).Build()
			xr := composite.New()
			xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
			xr.SetKind("CrossplaneControlPlane")
			xr.SetNamespace("team-a")
			xr.SetName("demo")
			xr.SetUID(xrUID)
			xr.Object["status"] = map[string]any{"outputs": map[string]any{
				"controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)},
				"version":              "v1.36.5",
				"kubeconfig":           map[string]any{"name": "eks-conn", "key": "kubeconfig"},
			}}
			s := &Scope{XR: xr, Cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}}}
			written := 0
			cp := controlPlane{infraCluster: infraCluster{client: c}, written: func(string) { written++ }}
			if err := cp.ObservePublished(context.Background(), s); err != nil {
				t.Fatalf("%s\nObservePublished(...): %v", tc.reason, err)
			}
			pub := cp.Publication(s)
			v, again := pub.Held, pub.Again
			if err := cp.Publish(context.Background(), s, pub); err != nil {
				t.Fatalf("%s\nPublish(...): %v", tc.reason, err)
			}
			switch {
			case tc.want == "" && v != nil:
				t.Errorf("%s\nPublication(...): unexpected verdict %+v", tc.reason, v)
			case tc.want != "" && (v == nil || v.Reason != tc.want):
				t.Errorf("%s\nPublication(...): want verdict %s, got %+v", tc.reason, tc.want, v)
			}
			if tc.want != infrav1.KubeconfigNotControlledReason && again.RequeueAfter != kubeconfigRecheck {
				t.Errorf("%s\nPublication(...): want a recheck after %s, got %+v", tc.reason, kubeconfigRecheck, again)
			}
			got := &corev1.Secret{}
			err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "demo-kubeconfig"}, got)
			switch {
			case tc.wantData == "" && !apierrors.IsNotFound(err):
				t.Errorf("%s\nthe cluster's kubeconfig Secret: want none, got %v", tc.reason, err)
			case tc.wantData != "" && err != nil:
				t.Errorf("%s\nthe cluster's kubeconfig Secret: %v", tc.reason, err)
			case tc.wantData != "" && string(got.Data["value"]) != tc.wantData:
				t.Errorf("%s\nthe cluster's kubeconfig Secret holds %q, want %q", tc.reason, got.Data["value"], tc.wantData)
			}
			if tc.wantData != "" && tc.want == "" {
				if !metav1.IsControlledBy(got, xr) || got.Type != clusterv1.ClusterSecretType || got.Labels[clusterv1.ClusterNameLabel] != "demo" {
					t.Errorf("%s\nthe cluster's kubeconfig Secret: want CAPI's type and label, controlled by the XR; got %+v", tc.reason, got.ObjectMeta)
				}
			}
			var events []string
			for _, e := range s.Events {
				events = append(events, e.Reason)
			}
			if tc.event != "" && (len(events) != 1 || events[0] != tc.event) || tc.event == "" && len(events) > 0 {
				t.Errorf("%s\nevents: want [%s], got %v", tc.reason, tc.event, events)
			}
			if written != len(events) {
				t.Errorf("%s\nkubeconfig writes counted: %d, want one per write (%v)", tc.reason, written, events)
			}
		})
	}
}
