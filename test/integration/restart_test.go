package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
)

// A restarted manager keeps every admission protection in place from its
// first reconcile: the policy that pauses new machine XRs and the credentials
// webhook are built from the XRDs on the API server, never from what the new
// process has adapted so far, so neither is deleted or narrowed meanwhile.
func TestARestartKeepsAdmissionProtection(t *testing.T) {
	g := NewWithT(t)
	capi, err := env.StartCAPI(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(capi.Stop()).To(Succeed()) })
	bridge, err := env.StartBridge(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ns := namespace(t)
	waitForCredentialsWebhook(t, ns)
	machines := "crossplanemachines"
	covers := func(rules []admissionv1.RuleWithOperations, resource string) bool {
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) {
				return true
			}
		}
		return false
	}
	g.Eventually(func(g Gomega) {
		p := &admissionv1.MutatingAdmissionPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: policies.HoldPolicyName}, p)).To(Succeed())
		var rules []admissionv1.RuleWithOperations
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			rules = append(rules, r.RuleWithOperations)
		}
		g.Expect(covers(rules, machines)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// Watch both registrations across the restart: every event must keep
	// them, covering CAPXP's kinds.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	holds, err := wc.Watch(ctx, &admissionv1.MutatingAdmissionPolicyList{}, client.MatchingFields{"metadata.name": policies.HoldPolicyName})
	g.Expect(err).NotTo(HaveOccurred())
	defer holds.Stop()
	webhooks, err := wc.Watch(ctx, &admissionv1.ValidatingWebhookConfigurationList{}, client.MatchingFields{"metadata.name": webhook.Name})
	g.Expect(err).NotTo(HaveOccurred())
	defer webhooks.Stop()

	g.Expect(bridge.Stop()).To(Succeed())
	restarted, err := env.StartBridge(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(restarted.Stop()).To(Succeed()) })

	// The restarted manager reconciles every XRD within a few seconds.
	var events []string
	deadline := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case e := <-holds.ResultChan():
			p, _ := e.Object.(*admissionv1.MutatingAdmissionPolicy)
			var rules []admissionv1.RuleWithOperations
			if p != nil {
				for _, r := range p.Spec.MatchConstraints.ResourceRules {
					rules = append(rules, r.RuleWithOperations)
				}
			}
			if e.Type == watch.Deleted || !covers(rules, machines) {
				events = append(events, fmt.Sprintf("policy %s covering %v", e.Type, rules))
			}
		case e := <-webhooks.ResultChan():
			w, _ := e.Object.(*admissionv1.ValidatingWebhookConfiguration)
			ok := w != nil && len(w.Webhooks) == 1 && covers(w.Webhooks[0].Rules, machines) && covers(w.Webhooks[0].Rules, "crossplaneclusters")
			if e.Type == watch.Deleted || !ok {
				events = append(events, fmt.Sprintf("credentials webhook %s", e.Type))
			}
		case <-deadline:
			done = true
		}
	}
	g.Expect(events).To(BeEmpty(), "admission protection lapsed during the restart")

	// And it still works: a new machine XR is paused at admission.
	xr := &infrav1.CrossplaneMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "after-restart-"},
		Spec:       infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: "small"}},
	}
	g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
	g.Expect(xr.Annotations).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
}
