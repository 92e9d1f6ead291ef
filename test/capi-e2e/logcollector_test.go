//go:build e2e

package capie2e

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// logCollector is the framework's ClusterLogCollector for CAPXP: a machine
// has no host to read logs from, so what explains it is its XR, what the XR
// composed, and its Node in the workload cluster; the infrastructure's logs
// are the plane's (Crossplane, the functions, provider-kubernetes, the
// bridge, CAPI's in-process controllers).
type logCollector struct{}

func (logCollector) CollectMachineLog(ctx context.Context, c client.Client, m *clusterv1.Machine, out string) error {
	var errs []error
	ref := m.Spec.InfrastructureRef
	if ref.IsDefined() {
		errs = append(errs, dumpXR(ctx, c, schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}, m.Namespace, ref.Name, out))
	}
	if m.Status.NodeRef.IsDefined() && p != nil {
		node := &corev1.Node{}
		if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err == nil {
			errs = append(errs, dump(out, "Node-"+node.Name, node))
		} else {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

func (logCollector) CollectMachinePoolLog(ctx context.Context, c client.Client, mp *clusterv1.MachinePool, out string) error {
	ref := mp.Spec.Template.Spec.InfrastructureRef
	if !ref.IsDefined() {
		return nil
	}
	return dumpXR(ctx, c, schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}, mp.Namespace, ref.Name, out)
}

// CollectInfrastructureLogs copies the plane's logs.
func (logCollector) CollectInfrastructureLogs(_ context.Context, _ client.Client, _ *clusterv1.Cluster, out string) error {
	if p == nil {
		return nil
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		return err
	}
	return filepath.WalkDir(p.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".log") {
			return err
		}
		b, err := os.ReadFile(path) //nolint:gosec // the plane's own logs.
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, d.Name()), b, 0o600)
	})
}

// dumpXR writes an XR and every resource it composed (its
// spec.crossplane.resourceRefs, nested XRs' included) into out.
func dumpXR(ctx context.Context, c client.Client, gk schema.GroupKind, ns, name string, out string) error {
	m, err := c.RESTMapper().RESTMapping(gk)
	if err != nil {
		return err
	}
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(m.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, xr); err != nil {
		return err
	}
	errs := []error{dump(out, gk.Kind+"-"+name, xr)}
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		apiVersion, _ := ref["apiVersion"].(string)
		kind, _ := ref["kind"].(string)
		refName, _ := ref["name"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" || refName == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gv.WithKind(kind))
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: refName}, obj); err != nil {
			errs = append(errs, err)
			continue
		}
		// A composed XR has references of its own.
		if _, nested, _ := unstructured.NestedSlice(obj.Object, "spec", "crossplane", "resourceRefs"); nested {
			errs = append(errs, dumpXR(ctx, c, gv.WithKind(kind).GroupKind(), ns, refName, out))
			continue
		}
		errs = append(errs, dump(out, kind+"-"+refName, obj))
	}
	return kerrors.NewAggregate(errs)
}

func dump(out, name string, obj any) error {
	if err := os.MkdirAll(out, 0o750); err != nil {
		return err
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name+".yaml"), b, 0o600)
}
