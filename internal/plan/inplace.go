package plan

// In-place updates: a MachineDeployment's Machines that CAPI would move to
// the new template in place, asked as CAPI asks, of CAPXP's own hooks run
// in this process.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/hooks"
)

// InPlace is what plan knows of CAPI's in-place updates.
type InPlace struct {
	// Discovered: CAPI discovered CAPXP's CanUpdateMachineSet hook (the
	// ExtensionConfig capxp lists it), so it asks the hook before it
	// replaces a MachineDeployment's Machines, when its InPlaceUpdates
	// feature is on.
	Discovered bool
	// Unread says why plan could not tell; it then predicts that every
	// change rolls, as without the hooks.
	Unread string
}

// inPlaceAssumed is what a plan that predicts an in-place update cannot
// know: CAPI's feature gate is its controller's flag, not an object.
const inPlaceAssumed = "Machines predicted UpdatedInPlace are so when CAPI's InPlaceUpdates feature is on (CAPI discovered CAPXP's in-place update hooks; whether it calls them is its feature gate, which plan cannot read); with it off, CAPI replaces them"

// ObserveInPlace reads whether CAPI discovered CAPXP's in-place update
// hooks.
func ObserveInPlace(ctx context.Context, c client.Reader) InPlace {
	ec := &runtimev1.ExtensionConfig{}
	err := c.Get(ctx, types.NamespacedName{Name: hooks.ExtensionConfigName}, ec)
	switch {
	case apierrors.IsNotFound(err) || kmeta.IsNoMatchError(err):
		return InPlace{}
	case err != nil:
		return InPlace{Unread: fmt.Sprintf("cannot read ExtensionConfig %s, so plan cannot tell whether CAPI updates Machines in place; it predicts that each change replaces them: %v", hooks.ExtensionConfigName, err)}
	}
	for _, h := range ec.Status.Handlers {
		if h.RequestHook.Hook == "CanUpdateMachineSet" {
			return InPlace{Discovered: true}
		}
	}
	return InPlace{}
}

// canUpdater is CAPXP's CanUpdateMachineSet hook.
type canUpdater interface {
	CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse)
}

// inPlaceRule decides, as CAPI's MachineDeployment controller does, whether
// an old MachineSet's Machines move to the MachineDeployment's template in
// place: a rolling update, a MachineSet CAPI finds eligible, both
// templates read, and the hook's patches making the old templates the new.
type inPlaceRule struct {
	hook   canUpdater
	reader client.Client
}

// updatesInPlace reports whether ms's Machines are updated in place to
// md's template, and why (CAPXP's answer, or why CAPI does not ask); an
// error is what plan could not read or ask.
func (r *inPlaceRule) updatesInPlace(ctx context.Context, md *clusterv1.MachineDeployment, ms, newMS *clusterv1.MachineSet, result mdutil.UpToDateResult) (bool, string, error) {
	if r == nil {
		return false, "", nil
	}
	if newMS != nil && ptr.Deref(newMS.Spec.Replicas, 0) >= ptr.Deref(md.Spec.Replicas, 0) {
		return false, "the new MachineSet has every replica already: CAPI scales the old ones down", nil
	}
	if t := md.Spec.Rollout.Strategy.Type; t != "" && t != clusterv1.RollingUpdateMachineDeploymentStrategyType {
		return false, fmt.Sprintf("CAPI updates in place only in a rolling update, not %s", t), nil
	}
	if !result.EligibleForInPlaceUpdate {
		return false, "CAPI does not update this MachineSet in place (rollout.after, or its own rules)", nil
	}
	desired := ms.DeepCopy()
	desired.Spec.Template.Spec = md.Spec.Template.Spec
	req := &runtimehooksv1.CanUpdateMachineSetRequest{
		Current: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: *ms.DeepCopy()},
		Desired: runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: *desired},
	}
	for _, t := range []struct {
		into *runtime.RawExtension
		ref  clusterv1.ContractVersionedObjectReference
	}{
		{&req.Current.InfrastructureMachineTemplate, ms.Spec.Template.Spec.InfrastructureRef},
		{&req.Desired.InfrastructureMachineTemplate, md.Spec.Template.Spec.InfrastructureRef},
		{&req.Current.BootstrapConfigTemplate, ms.Spec.Template.Spec.Bootstrap.ConfigRef},
		{&req.Desired.BootstrapConfigTemplate, md.Spec.Template.Spec.Bootstrap.ConfigRef},
	} {
		raw, found, err := r.template(ctx, ms.Namespace, t.ref)
		if err != nil {
			return false, "", err
		}
		if !found {
			// CAPI's in-place rule fails on it, and the rollout waits.
			return false, fmt.Sprintf("CAPI's rollout waits: %s %s is not found", t.ref.Kind, t.ref.Name), nil
		}
		*t.into = raw
	}
	if (req.Current.BootstrapConfigTemplate.Object == nil) != (req.Desired.BootstrapConfigTemplate.Object == nil) {
		return false, "CAPI does not update in place a bootstrap template added or removed", nil
	}
	resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
	r.hook.CanUpdateMachineSet(ctx, req, resp)
	if resp.Status == runtimehooksv1.ResponseStatusFailure {
		return false, "", errors.Errorf("CAPXP's CanUpdateMachineSet hook failed for MachineSet %s: %s", ms.Name, resp.Message)
	}
	matches, err := matchesAfter(req, resp)
	if err != nil {
		return false, "", errors.Wrapf(err, "MachineSet %s", ms.Name)
	}
	return matches, "CAPXP's in-place update hook: " + resp.Message, nil
}

// template reads the template a reference names, as CAPI sends it to the
// hooks: none for an undefined reference, and not found for a template
// that does not exist.
func (r *inPlaceRule) template(ctx context.Context, ns string, ref clusterv1.ContractVersionedObjectReference) (runtime.RawExtension, bool, error) {
	if !ref.IsDefined() {
		return runtime.RawExtension{}, true, nil
	}
	gv, err := groupVersion(r.reader, ref.APIGroup, ref.Kind)
	if err != nil {
		return runtime.RawExtension{}, false, err
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gv)
	u.SetKind(ref.Kind)
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return runtime.RawExtension{}, false, nil
		}
		return runtime.RawExtension{}, false, errors.Wrapf(err, "cannot get %s %s/%s", ref.Kind, ns, ref.Name)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return runtime.RawExtension{}, false, errors.Wrapf(err, "cannot encode %s %s", ref.Kind, ref.Name)
	}
	return runtime.RawExtension{Raw: raw, Object: u}, true, nil
}

// matchesAfter applies the hook's patches to the current objects and
// compares them with the desired ones as CAPI does: the MachineSets'
// machine specs without what never causes an in-place update, and the
// templates' spec.template.spec.
func matchesAfter(req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) (bool, error) {
	current := req.Current.MachineSet.DeepCopy()
	if resp.MachineSetPatch.IsDefined() {
		raw, err := json.Marshal(current)
		if err != nil {
			return false, err
		}
		if raw, err = applyPatch(raw, resp.MachineSetPatch); err != nil {
			return false, errors.Wrap(err, "cannot apply the hook's MachineSet patch")
		}
		current = &clusterv1.MachineSet{}
		if err := json.Unmarshal(raw, current); err != nil {
			return false, err
		}
	}
	if !equality.Semantic.DeepEqual(forDiff(current.Spec.Template.Spec), forDiff(req.Desired.MachineSet.Spec.Template.Spec)) {
		return false, nil
	}
	for _, t := range []struct {
		current, desired runtime.RawExtension
		patch            runtimehooksv1.Patch
	}{
		{req.Current.BootstrapConfigTemplate, req.Desired.BootstrapConfigTemplate, resp.BootstrapConfigTemplatePatch},
		{req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate, resp.InfrastructureMachineTemplatePatch},
	} {
		if t.current.Object == nil || t.desired.Object == nil {
			continue
		}
		raw := t.current.Raw
		if t.patch.IsDefined() {
			var err error
			if raw, err = applyPatch(raw, t.patch); err != nil {
				return false, errors.Wrap(err, "cannot apply the hook's template patch")
			}
		}
		got, err := templateSpec(raw)
		if err != nil {
			return false, err
		}
		want, err := templateSpec(t.desired.Raw)
		if err != nil {
			return false, err
		}
		if !equality.Semantic.DeepEqual(got, want) {
			return false, nil
		}
	}
	return true, nil
}

// templateSpec is a template's spec.template.spec.
func templateSpec(raw []byte) (any, error) {
	var u map[string]any
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, errors.Wrap(err, "cannot decode a template")
	}
	s, _, err := unstructured.NestedFieldNoCopy(u, "spec", "template", "spec")
	return s, err
}

// applyPatch applies a hook's patch, which is of the whole object, to doc.
func applyPatch(doc []byte, p runtimehooksv1.Patch) ([]byte, error) {
	switch p.PatchType {
	case runtimehooksv1.JSONMergePatchType:
		return jsonpatch.MergePatch(doc, p.Patch)
	case runtimehooksv1.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(p.Patch)
		if err != nil {
			return nil, err
		}
		return ops.Apply(doc)
	}
	return nil, errors.Errorf("a patch of type %q", p.PatchType)
}

// forDiff is a machine spec without the fields CAPI never updates in place
// for (they are written in place, or never change), as CAPI compares
// them.
func forDiff(spec clusterv1.MachineSpec) clusterv1.MachineSpec {
	s := *spec.DeepCopy()
	s.ClusterName = ""
	s.Bootstrap = clusterv1.Bootstrap{}
	s.InfrastructureRef = clusterv1.ContractVersionedObjectReference{}
	s.ProviderID = ""
	s.MinReadySeconds = nil
	s.ReadinessGates = nil
	s.Deletion.NodeDrainTimeoutSeconds = nil
	s.Deletion.NodeVolumeDetachTimeoutSeconds = nil
	s.Deletion.NodeDeletionTimeoutSeconds = nil
	s.Taints = nil
	return s
}

// inPlaceUnknown says what plan assumed, once, when it predicted an
// in-place update.
func inPlaceUnknown(clusters []Cluster) []string {
	for _, c := range clusters {
		for _, m := range c.Machines {
			if m.Verdict == UpdatedInPlace {
				return []string{inPlaceAssumed}
			}
		}
	}
	return nil
}

// inPlaceReason is why a Machine is, or is not, updated in place, as a
// reason of its prediction.
func inPlaceReason(why string) []string {
	if why = strings.TrimSpace(why); why == "" {
		return nil
	}
	return []string{why}
}
