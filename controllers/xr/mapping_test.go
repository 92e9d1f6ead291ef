package xr

import (
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
)

func TestDecideMapping(t *testing.T) {
	readySince := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	ready := xrConditions{
		synced: xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue, Reason: xpv2.ReasonReconcileSuccess, ObservedGeneration: 1},
		ready:  xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(readySince)},
	}
	creating := ready
	creating.ready = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ReasonCreating, Message: "Unready resources: node", ObservedGeneration: 1}
	noOutputs := func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "status", "outputs") }
	type want struct {
		ready       bool
		reason      string // the verdict's reason when not ready
		set         bool
		observed    int64
		provisioned bool
		milestone   bool
		readySince  time.Time
		event       bool
		again       bool
	}
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		memory recalled
		// kubeconfig is what a control plane's ObservePublished read.
		kubeconfig *contracts.Kubeconfig
		want       want
	}{
		"WaitingForCrossplane": {
			reason: "until Crossplane says Ready, nothing is copied, published or provisioned",
			xr:     testMachineXR(), memory: recalled{conditions: creating},
			want: want{reason: infrav1.WaitingForCompositionReason},
		},
		"NoOutputYet": {
			reason: "Ready without the contract's outputs is waiting for them",
			xr:     testMachineXR(noOutputs), memory: recalled{conditions: ready},
			want: want{reason: infrav1.MissingOutputsReason},
		},
		"FirstProvisioning": {
			reason: "Ready with its outputs, a machine XR gets them in its spec and reaches the milestone, timed from Crossplane's Ready",
			xr:     testMachineXR(), memory: recalled{conditions: ready},
			want: want{ready: true, set: true, observed: 1, provisioned: true, milestone: true, readySince: readySince},
		},
		"ProvisionedBefore": {
			reason: "the milestone is applied again, neither timed nor announced",
			xr:     testMachineXR(provisioned), memory: recalled{conditions: ready, provisioned: true},
			want: want{ready: true, set: true, observed: 1, provisioned: true, milestone: true},
		},
		"CacheBehindTheMilestone": {
			reason: "a cache that does not show the bridge's own write of the milestone yet: provisioned, not written again",
			xr:     testMachineXR(), memory: recalled{conditions: ready, provisioned: true},
			want: want{ready: true, set: true, observed: 1, provisioned: true},
		},
		"ProvisionedStaysProvisioned": {
			reason: "a provisioned XR that Crossplane no longer says Ready keeps its milestone",
			xr:     testMachineXR(provisioned), memory: recalled{conditions: creating},
			want: want{reason: infrav1.WaitingForCompositionReason, provisioned: true, milestone: true},
		},
		"ClusterProvisioned": {
			reason: "a cluster XR's first provisioning is an event",
			xr:     testXR(), memory: recalled{conditions: ready},
			want: want{ready: true, set: true, observed: 1, provisioned: true, milestone: true, readySince: readySince, event: true},
		},
		"KubeconfigMissing": {
			reason: "a control plane whose kubeconfig Secret does not exist yet is held by its publication, and looked at again",
			xr:     testControlPlaneXR(), memory: recalled{conditions: ready},
			kubeconfig: &contracts.Kubeconfig{},
			want:       want{reason: infrav1.WaitingForKubeconfigReason, again: true},
		},
		"KubeconfigPublished": {
			reason: "a control plane with a usable kubeconfig publishes it and is initialized",
			xr:     testControlPlaneXR(), memory: recalled{conditions: ready},
			kubeconfig: &contracts.Kubeconfig{Source: adminKubeconfig()},
			want:       want{ready: true, set: true, observed: 1, provisioned: true, milestone: true, readySince: readySince, event: true, again: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kind := map[string]string{
				infrav1.CrossplaneClusterKind:      infrav1.ContractInfraCluster,
				infrav1.CrossplaneMachineKind:      infrav1.ContractInfraMachine,
				infrav1.CrossplaneControlPlaneKind: infrav1.ContractControlPlane,
			}[tc.xr.GetKind()]
			contract, err := contracts.New(kind, contracts.Options{Client: fake.NewClientBuilder().Build(), Missing: access.NewReads(nil).Missing})
			if err != nil {
				t.Fatal(err)
			}
			r := &xrReconciler{contract: contract}
			s := &scope{Scope: contracts.Scope{XR: &composite.Unstructured{Unstructured: *tc.xr},
				Cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}}},
				before: tc.xr.DeepCopy(), recalled: tc.memory}
			if tc.kubeconfig != nil {
				k := *tc.kubeconfig
				k.From.Name, k.From.Key = "demo-admin", "kubeconfig"
				s.Kubeconfig = &k
			}
			m := r.decideMapping(s)
			got := want{ready: m.verdict.Ready, set: m.set != nil, observed: m.observed, provisioned: m.provisioned,
				milestone: m.milestone, readySince: m.readySince, event: m.event != "", again: m.again.RequeueAfter > 0}
			if !m.verdict.Ready {
				got.reason = m.verdict.Reason
			}
			if got != tc.want {
				t.Errorf("%s\ndecideMapping(...):\n got %+v\nwant %+v", tc.reason, got, tc.want)
			}
			if m.publication.Create != nil != (name == "KubeconfigPublished") {
				t.Errorf("%s\ndecideMapping(...): publication creates %v", tc.reason, m.publication.Create)
			}
		})
	}
}
