package describe

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
)

const ns = "team-a"

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// obj is an object of a kind in team-a (cluster-scoped when namespace is
// unset by the caller), with fields set at paths ("a.b.c") and conditions
// "Type=Status/Reason: message", each 5 minutes old.
func obj(apiVersion, kind, name string, fields map[string]any, conds ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	for path, v := range fields {
		if err := unstructured.SetNestedField(u.Object, v, strings.Split(path, ".")...); err != nil {
			panic(err) // the tests' own literals
		}
	}
	var cs []any
	for _, c := range conds {
		typ, rest, _ := strings.Cut(c, "=")
		status, rest, _ := strings.Cut(rest, "/")
		reason, msg, _ := strings.Cut(rest, ": ")
		cs = append(cs, map[string]any{"type": typ, "status": status, "reason": reason, "message": msg,
			"lastTransitionTime": now.Add(-5 * time.Minute).Format(time.RFC3339)})
	}
	if len(cs) > 0 {
		_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
	}
	return u
}

func ref(group, kind, name string) map[string]any {
	return map[string]any{"apiGroup": group, "kind": kind, "name": name}
}

func labels(l map[string]string) func(*unstructured.Unstructured) *unstructured.Unstructured {
	return func(u *unstructured.Unstructured) *unstructured.Unstructured { u.SetLabels(l); return u }
}

func clusterScoped(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetNamespace("")
	return u
}

const (
	capi   = "cluster.x-k8s.io/v1beta2"
	infra  = "infrastructure.cluster.x-k8s.io/v1alpha1"
	kube   = "kubernetes.m.crossplane.io/v1alpha1"
	member = "cluster.x-k8s.io/cluster-name"
)

// fleet is a Cluster with a control plane of one Machine and a
// MachineDeployment of three: one whose XR is gone, one whose XR
// Crossplane cannot compose, one with a composed Node not yet Ready.
func fleet() []client.Object {
	in := map[string]string{member: "demo"}
	cp := map[string]string{member: "demo", "cluster.x-k8s.io/control-plane": ""}
	md := map[string]string{member: "demo", "cluster.x-k8s.io/deployment-name": "workers"}
	composed := func(name string) []any {
		return []any{map[string]any{"apiVersion": kube, "kind": "Object", "name": name}}
	}
	shared := map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ClusterProviderConfig", "name": "shared"}
	own := map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tenant": "gold"}}},
		obj(capi, "Cluster", "demo", map[string]any{
			"spec.infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "CrossplaneCluster", "demo"),
			"spec.controlPlaneRef":   ref("controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "demo-cp"),
		}, "Available=False/NotAvailable: * WorkersAvailable: 1 of 3 available", "Ready=True/Ready"),
		obj(infra, "CrossplaneCluster", "demo", map[string]any{
			"spec.crossplane.resourceRefs": composed("demo-endpoint"), "spec.providerConfigRef": shared,
		}, "Synced=True/ReconcileSuccess", "Ready=True/Available", "Responsive=True/WatchCircuitClosed"),
		obj(kube, "Object", "demo-endpoint", nil, "Synced=True/ReconcileSuccess", "Ready=True/Available"),
		clusterScoped(obj(kube, "ClusterProviderConfig", "shared", nil)),
		obj(kube, "ProviderConfig", "workload", nil),
		&infrav1.ClusterProviderConfigGrant{
			ObjectMeta: metav1.ObjectMeta{Name: "gold-tenants"},
			Spec: infrav1.ClusterProviderConfigGrantSpec{
				ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Name: "shared"},
				AllowedNamespaces: infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "gold"}}},
			},
		},
		obj("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", "demo-cp", nil, "Available=True/Available"),
		labels(cp)(obj(capi, "Machine", "demo-cp-0", map[string]any{
			"spec.infrastructureRef":     ref("infrastructure.cluster.x-k8s.io", "CrossplaneMachine", "demo-cp-0"),
			"spec.bootstrap.configRef":   ref("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "demo-cp-0"),
			"metadata.creationTimestamp": now.Format(time.RFC3339),
		}, "Ready=True/Ready")),
		obj(infra, "CrossplaneMachine", "demo-cp-0", map[string]any{
			"spec.crossplane.resourceRefs": composed("demo-cp-0-node"), "spec.providerConfigRef": own,
		}, "Synced=True/ReconcileSuccess", "Ready=True/Available"),
		obj(kube, "Object", "demo-cp-0-node", map[string]any{"metadata.annotations": map[string]any{"crossplane.io/external-name": "demo-cp-0"}},
			"Synced=True/ReconcileSuccess", "Ready=True/Available"),
		obj("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", "demo-cp-0", nil, "Ready=True/Ready"),
		labels(in)(obj(capi, "MachineDeployment", "workers", nil, "Available=False/NotAvailable: 1 available replicas, at least 3 required")),
		labels(md)(obj(capi, "Machine", "workers-a", map[string]any{
			"spec.infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "CrossplaneMachine", "workers-a"),
		}, "Ready=False/NotReady")),
		labels(md)(obj(capi, "Machine", "workers-b", map[string]any{
			"spec.infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "CrossplaneMachine", "workers-b"),
		}, "Ready=False/NotReady")),
		obj(infra, "CrossplaneMachine", "workers-b", map[string]any{"spec.crossplane.compositionRef.name": "machine-local"},
			"Synced=False/ReconcileError: cannot compose resources:\n  function failed", "Ready=False/Creating"),
		labels(md)(obj(capi, "Machine", "workers-c", map[string]any{
			"spec.infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "CrossplaneMachine", "workers-c"),
		}, "Ready=True/Ready", "CrossplaneInfrastructureReady=False/CredentialsNotGranted: namespace team-a may not use it")),
		obj(infra, "CrossplaneMachine", "workers-c", map[string]any{
			"spec.crossplane.resourceRefs": composed("workers-c-node"), "spec.providerConfigRef": shared,
		}, "Synced=True/ReconcileSuccess", "Ready=True/Available"),
		obj(kube, "Object", "workers-c-node", nil, "Synced=True/ReconcileSuccess", "Ready=False/Creating"),
	}
}

func mapper() meta.RESTMapper {
	kinds := []struct {
		gvk  schema.GroupVersionKind
		root bool
	}{
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}, false},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}, false},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}, false},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"}, false},
		{schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}, false},
		{schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}, false},
		{schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "CrossplaneCluster"}, false},
		{schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "CrossplaneMachine"}, false},
		{schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "CrossplaneMachinePool"}, false},
		{schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "ClusterProviderConfigGrant"}, true},
		{schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "Object"}, false},
		{schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "ProviderConfig"}, false},
		{schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "ClusterProviderConfig"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, true},
	}
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		gvs = append(gvs, k.gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, k := range kinds {
		scope := meta.RESTScopeNamespace
		if k.root {
			scope = meta.RESTScopeRoot
		}
		m.Add(k.gvk, scope)
	}
	return m
}

func TestCluster(t *testing.T) {
	forbidGrants := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if _, ok := l.(*infrav1.ClusterProviderConfigGrantList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "clusterproviderconfiggrants"}, "", nil)
		}
		return c.List(ctx, l, opts...)
	}}
	without := func(kind, name string) func([]client.Object) []client.Object {
		return func(objs []client.Object) []client.Object {
			var out []client.Object
			for _, o := range objs {
				if o.GetName() == name && (o.GetObjectKind().GroupVersionKind().Kind == kind || kind == "") {
					continue
				}
				out = append(out, o)
			}
			return out
		}
	}
	cases := map[string]struct {
		reason  string
		objects func([]client.Object) []client.Object
		funcs   interceptor.Funcs
		opts    Options
		name    string
		want    string
		wantErr bool
	}{
		"Fleet": {
			reason: "every XR under its CAPI owner, with its credentials and what it composed; a missing XR is a row; an XR's status is the bridge's verdict, then Synced, Ready, Responsive",
			want: `NAME                                                        STATUS   REASON                 SINCE  MESSAGE
Cluster team-a/demo                                         False    NotAvailable           5m     * WorkersAvailable: 1 of 3 available
├─CrossplaneCluster demo                                    True     Available              5m
│ ├─Credentials: ClusterProviderConfig shared               True     Granted                       namespace team-a may use it: ClusterProviderConfigGrant gold-tenants
│ └─Object demo-endpoint                                    True     Available              5m
├─KubeadmControlPlane demo-cp                               True     Available              5m
│ └─Machine demo-cp-0                                       True     Ready                  5m
│   └─CrossplaneMachine demo-cp-0                           True     Available              5m
│     ├─Credentials: ProviderConfig workload                True     Found
│     └─Object demo-cp-0-node                               True     Available              5m     external name demo-cp-0
└─Workers
  └─MachineDeployment workers                               False    NotAvailable           5m     1 available replicas, at least 3 required
    ├─Machine workers-a                                     False    NotReady               5m
    │ └─MachineInfrastructure: CrossplaneMachine workers-a  Unknown  NotFound                      crossplanemachines.infrastructure.cluster.x-k8s.io "workers-a" not found
    ├─Machine workers-b                                     False    NotReady               5m
    │ └─CrossplaneMachine workers-b                         False    ReconcileError         5m     cannot compose resources: function failed
    └─Machine workers-c                                     True     Ready                  5m
      └─CrossplaneMachine workers-c                         False    CredentialsNotGranted  5m     namespace team-a may not use it
        ├─Credentials: ClusterProviderConfig shared         True     Granted                       namespace team-a may use it: ClusterProviderConfigGrant gold-tenants
        └─Object workers-c-node                             False    Creating               5m
`,
		},
		"NotGranted": {
			reason:  "without a grant, the credentials row says which grant is missing",
			objects: without("", "gold-tenants"),
			name:    "workers-c",
			want:    "False NotGranted namespace team-a may not use ClusterProviderConfig kubernetes.m.crossplane.io/shared: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with providerConfigRef kubernetes.m.crossplane.io/shared covering namespace team-a is missing",
		},
		"GrantsForbidden": {
			reason: "a tenant who may not read grants sees that, not an error",
			funcs:  forbidGrants,
			name:   "workers-c",
			want:   "Unknown Forbidden cannot list ClusterProviderConfigGrants",
		},
		"ConfigMissing": {
			reason:  "credentials that do not exist are a row saying so",
			objects: without("ProviderConfig", "workload"),
			name:    "demo-cp-0",
			want:    `Unknown NotFound providerconfigs.kubernetes.m.crossplane.io "workload" not found`,
		},
		"Echo": {
			reason: "--echo shows the bootstrap configs too; composed resources show their external names",
			opts:   Options{Echo: true},
			name:   "demo-cp-0",
			want:   "Object demo-cp-0-node True Available 5m external name demo-cp-0 | KubeadmConfig demo-cp-0 True Ready 5m",
		},
		"ShowConditions": {
			reason: "every condition of the kinds asked for",
			opts:   Options{ShowConditions: "CrossplaneMachine/workers-b"},
			name:   "workers-b",
			want:   "· Synced False ReconcileError 5m cannot compose resources: function failed | · Ready False Creating 5m",
		},
		"MachinePool": {
			reason: "a MachinePool's XR is its child, with its credentials and what it composed, as a Machine's is",
			objects: func(objs []client.Object) []client.Object {
				return append(objs,
					labels(map[string]string{member: "demo"})(obj(capi, "MachinePool", "pool", map[string]any{
						"spec.template.spec.infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "CrossplaneMachinePool", "pool"),
					}, "Available=True/Available")),
					obj(infra, "CrossplaneMachinePool", "pool", map[string]any{
						"spec.crossplane.resourceRefs": []any{map[string]any{"apiVersion": kube, "kind": "Object", "name": "pool-asg"}},
						"spec.providerConfigRef":       map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload"},
					}, "Synced=True/ReconcileSuccess", "Ready=True/Available"),
					obj(kube, "Object", "pool-asg", nil, "Synced=True/ReconcileSuccess", "Ready=True/Available"))
			},
			name: "pool",
			want: "CrossplaneMachinePool pool True Available 5m | Credentials: ProviderConfig workload True Found | Object pool-asg True Available 5m",
		},
		"NoCluster": {
			reason:  "a Cluster that cannot be read is an error",
			objects: without("Cluster", "demo"),
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := fleet()
			if tc.objects != nil {
				objs = tc.objects(objs)
			}
			c := fake.NewClientBuilder().WithScheme(controllers.NewScheme()).WithRESTMapper(mapper()).
				WithObjects(objs...).WithInterceptorFuncs(tc.funcs).Build()
			tree, err := Cluster(t.Context(), c, ns, "demo", tc.opts)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("%s\nCluster(...): want an error, got none", tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nCluster(...): %v", tc.reason, err)
			}
			var out bytes.Buffer
			if err := Print(&out, tree, PrintOptions{Now: now}); err != nil {
				t.Fatal(err)
			}
			if tc.name == "" {
				if diff := cmp.Diff(tc.want, out.String()); diff != "" {
					t.Errorf("%s\nPrint(Cluster(...)): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			// The rows below the named object, their columns joined by
			// single spaces and the rows by " | ".
			if got := below(out.String(), tc.name); !strings.Contains(got, tc.want) {
				t.Errorf("%s\nthe rows below %s:\n%s\nwant them to hold:\n%s\nthe whole tree:\n%s", tc.reason, tc.name, got, tc.want, out.String())
			}
		})
	}
}

// below returns the rows of a printed tree below the Machine or
// MachinePool called name up to the next one, without the tree's branches, each row's columns
// joined by single spaces and the rows by " | ".
func below(tree, name string) string {
	var rows []string
	in := false
	for _, line := range strings.Split(tree, "\n") {
		fields := strings.Fields(strings.TrimLeft(line, "│├└─ "))
		if len(fields) > 1 && (fields[0] == "Machine" || fields[0] == "MachinePool") {
			in = fields[1] == name
			continue
		}
		if in && len(fields) > 0 {
			rows = append(rows, strings.Join(fields, " "))
		}
	}
	return strings.Join(rows, " | ")
}

func TestPrintColor(t *testing.T) {
	tree := &Node{Kind: "Cluster", Namespace: ns, Name: "demo", Status: metav1.ConditionFalse, Reason: "NotAvailable", Children: []*Node{
		{Kind: "CrossplaneCluster", Namespace: ns, Name: "demo", APIVersion: infra, Status: metav1.ConditionTrue, Reason: "Available"},
		{Kind: "Machine", Namespace: ns, Name: "m", APIVersion: capi, Status: metav1.ConditionUnknown, Reason: "NodeMissing"},
		{Kind: "Workers", Name: "Workers"},
	}}
	cases := map[string]struct {
		reason string
		color  bool
		want   string
	}{
		"Plain": {
			reason: "piped output has no escape sequences",
			want: `NAME                      STATUS   REASON        SINCE  MESSAGE
Cluster team-a/demo       False    NotAvailable
├─CrossplaneCluster demo  True     Available
├─Machine m               Unknown  NodeMissing
└─Workers
`,
		},
		"Color": {
			reason: "on a terminal each status is coloured, and the columns stay aligned",
			color:  true,
			want: "NAME                      \x1b[39mSTATUS\x1b[0m   REASON        SINCE  MESSAGE\n" +
				"Cluster team-a/demo       \x1b[31mFalse\x1b[0m    NotAvailable\n" +
				"├─CrossplaneCluster demo  \x1b[32mTrue\x1b[0m     Available\n" +
				"├─Machine m               \x1b[33mUnknown\x1b[0m  NodeMissing\n" +
				"└─Workers                 \x1b[39m\x1b[0m\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Print(&out, tree, PrintOptions{Color: tc.color, Now: now}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\nPrint(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPrintEscapesWhatATerminalWouldAct(t *testing.T) {
	cases := map[string]struct {
		node *Node
		want string
	}{
		"an escape sequence in a message": {
			node: &Node{Kind: "Cluster", Namespace: ns, Name: "demo", Status: metav1.ConditionFalse, Reason: "Held", Message: "\x1b[2J\x1b[31mowned"},
			want: "NAME                 STATUS  REASON  SINCE  MESSAGE\n" +
				`Cluster team-a/demo  False   Held           \u001b[2J\u001b[31mowned` + "\n",
		},
		"a carriage return and a tab in a reason and an external name": {
			node: &Node{Kind: "Cluster", Namespace: ns, Name: "demo", Reason: "A\rB", ExternalName: "x\ty"},
			want: "NAME                 STATUS  REASON    SINCE  MESSAGE\n" +
				`Cluster team-a/demo          A\u000dB         external name x\u0009y` + "\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Print(&out, tc.node, PrintOptions{Now: now}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("Print(...): -want, +got:\n%s", diff)
			}
		})
	}
}
