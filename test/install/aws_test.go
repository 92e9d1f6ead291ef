package install

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// providerFinalizer is the finalizer crossplane-runtime's managed
// reconciler, which every upjet provider runs, puts on a managed resource
// before it creates or observes the external resource.
const providerFinalizer = "finalizer.managedresource.crossplane.io"

// awsCloud plays provider-aws, which cannot run here: there is no AWS. It
// keeps the account's record (which external resources exist, every create
// and delete) and, on every plane it runs on, makes for each managed
// resource the decisions crossplane-runtime's managed reconciler makes:
// nothing while the resource is paused; once it is deleted, delete the
// external resource only when the provider's finalizer is the last one
// left, then remove it; otherwise add its finalizer, create the external
// resource when the resource names none (or names one that does not exist)
// and record its ID as the external name, and report what the provider
// would (compositions.Provide: status.atProvider, Ready and Synced).
type awsCloud struct {
	kinds []schema.GroupVersionKind

	mu               sync.Mutex
	exists           map[string]bool
	created, deleted []string
}

func newAWSCloud(t *testing.T) *awsCloud {
	t.Helper()
	kinds, err := compositions.ComposedKinds("aws")
	if err != nil {
		t.Fatal(err)
	}
	return &awsCloud{kinds: kinds, exists: map[string]bool{}}
}

// changes returns how many external resources were created and deleted.
func (a *awsCloud) changes() (created, deleted []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.created), slices.Clone(a.deleted)
}

// run plays the provider for the managed resources of namespace ns on a
// plane until ctx ends, as a provider does: woken by its watches, and every
// few seconds from its cache. An error it cannot retry fails t.
func (a *awsCloud) run(ctx context.Context, t *testing.T, p *plane.Plane, ns string) {
	dyn, err := dynamic.NewForConfig(p.Management().Config)
	if err != nil {
		t.Error(err)
		return
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 5*time.Second, ns, nil)
	var mu sync.Mutex // one reconcile at a time, as with one worker
	c := p.Management().Client
	handle := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		err := a.reconcile(ctx, c, u.DeepCopy())
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			t.Errorf("the AWS provider's stand-in: %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, k := range a.kinds {
		gvr := k.GroupVersion().WithResource(compositions.Plural(k.Kind))
		if _, err := f.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, obj any) { handle(obj) },
		}); err != nil {
			t.Error(err)
			return
		}
	}
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}

func (a *awsCloud) reconcile(ctx context.Context, c client.Client, mr *unstructured.Unstructured) error {
	if meta.IsPaused(mr) {
		return nil
	}
	what := mr.GetKind() + " " + mr.GetNamespace() + "/" + mr.GetName()
	name := meta.GetExternalName(mr)
	if !mr.GetDeletionTimestamp().IsZero() {
		fs := mr.GetFinalizers()
		if !slices.Contains(fs, providerFinalizer) || len(fs) > 1 {
			return nil
		}
		a.mu.Lock()
		if a.exists[name] {
			delete(a.exists, name)
			a.deleted = append(a.deleted, what+" "+name)
		}
		a.mu.Unlock()
		orig := mr.DeepCopy()
		mr.SetFinalizers(nil)
		return c.Patch(ctx, mr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}

	observed := mr.DeepCopy()
	compositions.Provide(observed)
	id, _, _ := unstructured.NestedString(observed.Object, "status", "atProvider", "id")
	a.mu.Lock()
	if name == "" {
		name = id
	}
	if !a.exists[name] {
		a.exists[name] = true
		a.created = append(a.created, what+" "+name)
	}
	a.mu.Unlock()

	if meta.GetExternalName(mr) != name || !slices.Contains(mr.GetFinalizers(), providerFinalizer) {
		orig := mr.DeepCopy()
		meta.SetExternalName(mr, name)
		mr.SetFinalizers(append(mr.GetFinalizers(), providerFinalizer))
		if err := c.Patch(ctx, mr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	if ready(mr) {
		return nil
	}
	orig := mr.DeepCopy()
	mr.Object["status"] = observed.Object["status"]
	return c.Status().Patch(ctx, mr, client.MergeFrom(orig))
}

// ready says whether an object's Ready condition is True.
func ready(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, cd := range conds {
		if m, ok := cd.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// awsCredentials creates, on a plane, what a platform sets up for a team
// on each management cluster: an AWS ProviderConfig in the team's namespace
// and the Secret it reads.
func awsCredentials(ctx context.Context, t *testing.T, p *plane.Plane, ns, name string) {
	t.Helper()
	create(ctx, t, p, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(ctx, t, p, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-credentials"},
		StringData: map[string]string{"credentials": "[default]\naws_access_key_id = none\naws_secret_access_key = none\n"},
	})
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aws.m.upbound.io/v1beta1",
		"kind":       "ProviderConfig",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"credentials": map[string]any{
			"source":    "Secret",
			"secretRef": map[string]any{"namespace": ns, "name": name + "-credentials", "key": "credentials"},
		}},
	}}
	create(ctx, t, p, pc)
}

// provisionAWS creates an AWS cluster through CAPXP's aws Compositions with
// one control-plane machine, as the default flavor does but without
// KubeadmControlPlane, which the plane does not run: the Machine is
// created directly, with its bootstrap data secret. It plays the kubelet
// too: once the Machine has a providerID, a Node with it registers in the
// workload cluster (the API server the plane's workload kubeconfig names).
// It returns the Node's name.
func provisionAWS(ctx context.Context, t *testing.T, p *plane.Plane, ns, name, credentials string) string {
	t.Helper()
	c := p.Management().Client
	fd := "eu-west-1a"
	cpLabels := map[string]any{clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: ""}
	objs := []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": p.Workload.Kubeconfig},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			StringData: map[string]string{"format": "cloud-config", "value": "#cloud-config\n"},
		},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": "CrossplaneCluster",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"parameters": map[string]any{
					"region":  "eu-west-1",
					"network": map[string]any{"cidrBlock": "10.20.0.0/16"},
					// The aws Composition spreads the cluster over three
					// zones, and is not ready with fewer.
					"failureDomains": []any{map[string]any{"name": fd, "controlPlane": true},
						map[string]any{"name": "eu-west-1b", "controlPlane": true}, map[string]any{"name": "eu-west-1c", "controlPlane": true}},
					"controlPlaneLoadBalancer": map[string]any{"scheme": "InternetFacing", "port": int64(6443)},
				},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": credentials},
				"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{compositions.LabelBackend: "aws"}}},
			},
		}},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneCluster", Name: name}},
		},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": "CrossplaneMachine",
			"metadata": map[string]any{"namespace": ns, "name": name + "-cp-0", "labels": cpLabels},
			"spec": map[string]any{
				"parameters": map[string]any{"size": "m6i.large", "image": "ami-0123456789abcdef0"},
				"crossplane": map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{
					compositions.LabelBackend: "aws", compositions.LabelMachineRole: "control-plane"}}},
			},
		}},
		&clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cp-0",
				Labels: map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: ""}},
			Spec: clusterv1.MachineSpec{
				ClusterName:   name,
				Version:       "v1.36.5",
				FailureDomain: fd,
				Bootstrap:     clusterv1.Bootstrap{DataSecretName: ptrTo(name + "-bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneMachine", Name: name + "-cp-0"},
			},
		},
	}
	for _, o := range objs {
		create(ctx, t, p, o)
	}
	var node string
	eventually(t, "the AWS machine has a providerID", 5*time.Minute, func() error {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cp-0"}, m); err != nil {
			return err
		}
		if m.Spec.ProviderID == "" {
			return errors.New("no providerID yet")
		}
		node = name + "-cp-0"
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: m.Spec.ProviderID}}
		return client.IgnoreAlreadyExists(p.Workload.Client.Create(ctx, n))
	})
	return node
}

func ptrTo[T any](v T) *T { return &v }

// composedIn lists the composed resources of the kinds given in a
// namespace, by kind and name.
func composedIn(ctx context.Context, p *plane.Plane, ns string, kinds []schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, k := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.GroupVersion().WithKind(k.Kind + "List"))
		if err := p.Management().Client.List(ctx, l, client.InNamespace(ns)); err != nil && !apimeta.IsNoMatchError(err) {
			return nil, err
		}
		out = append(out, l.Items...)
	}
	sort.Slice(out, func(i, j int) bool { return key(&out[i]) < key(&out[j]) })
	return out, nil
}

func key(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }

// externalNames maps every composed resource of a namespace to its
// external name: what identifies the external resource to its provider.
func externalNames(ctx context.Context, t *testing.T, p *plane.Plane, ns string, kinds []schema.GroupVersionKind) map[string]string {
	t.Helper()
	objs, err := composedIn(ctx, p, ns, kinds)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(objs))
	for i := range objs {
		out[key(&objs[i])] = meta.GetExternalName(&objs[i])
	}
	return out
}

// sameExternalNames says how the external names of after differ from
// before's, if they do.
func sameExternalNames(before, after map[string]string) error {
	var diff []string
	for k, v := range before {
		if after[k] != v {
			diff = append(diff, fmt.Sprintf("%s: %q, was %q", k, after[k], v))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, k+": new")
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return fmt.Errorf("%v", diff)
	}
	return nil
}
