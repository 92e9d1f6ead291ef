package install

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// The provider the local Compositions compose with, and its credentials'
// kinds: namespaced ProviderConfig, ClusterProviderConfig, and the legacy
// cluster-scoped ProviderConfig of the same provider.
const (
	k8sGroup       = "kubernetes.m.crossplane.io"
	k8sLegacyGroup = "kubernetes.crossplane.io"
	k8sVersion     = "v1alpha1"
)

// The credentials of the attack: shared ones no grant covers for the tenant,
// the tenant's own ambient-identity config, and one the tenant is granted
// until the platform revokes it. Their names are unique in the audit log.
const (
	sharedConfig    = "shared-ungranted"
	legacyConfig    = "legacy-ungranted"
	ambientConfig   = "ambient-ungranted"
	revocableConfig = "shared-revocable"
	ownConfig       = "own-secret"
	execConfig      = "own-exec-plugin"
	// anotherTeams is a platform Composition written for another team,
	// hard-coding shared credentials.
	anotherTeams = "another-teams-cluster"
)

// hostileNamespace is the attacking tenant's namespace.
const hostileNamespace = "tenant-hostile"

// attempt is one thing a hostile tenant tries, and what it got.
type attempt struct {
	name, outcome string
}

// attackAsTenant attacks an installed CAPXP as a tenant user (impersonated)
// bound in its namespace to exactly the shipped capxp-system-tenant ClusterRole: every
// way the tenant has to compose with credentials its namespace was not
// granted. It asserts what each attempt gets, that a revoked grant pauses
// what was composed within 5 s, and, from the management API server's audit
// log over the whole run, that no managed resource was ever created or
// updated naming ungranted credentials. It logs the attempts and the count
// as the rows of docs/tenancy.md's table.
func attackAsTenant(ctx context.Context, t *testing.T, p *plane.Plane) {
	t.Helper()
	admin := p.Management().Client
	const ns, creds = hostileNamespace, "platform-credentials"
	start := time.Now()
	// When the revocable grant went, and came back.
	var revokedSince, regrantedAt time.Time

	// The platform's side: shared credentials in a namespace the tenant
	// cannot read, a legacy cluster-scoped config, and one grant.
	legacyCRD(t, p)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: creds}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: creds, Name: "workload"}, Data: map[string][]byte{"kubeconfig": p.Workload.Kubeconfig}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload"}, Data: map[string][]byte{"kubeconfig": p.Workload.Kubeconfig}},
		providerConfig(k8sGroup, "ClusterProviderConfig", "", sharedConfig, secretCreds(creds)),
		providerConfig(k8sGroup, "ClusterProviderConfig", "", revocableConfig, secretCreds(creds)),
		providerConfig(k8sLegacyGroup, "ProviderConfig", "", legacyConfig, secretCreds(creds)),
	} {
		createAs(ctx, t, admin, o)
	}
	grant := &infrav1.ClusterProviderConfigGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile-revocable"},
		Spec: infrav1.ClusterProviderConfigGrantSpec{
			ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: k8sGroup, Name: revocableConfig},
			AllowedNamespaces: infrav1.AllowedNamespaces{Names: []string{ns}},
		},
	}
	createAs(ctx, t, admin, grant)
	createAs(ctx, t, admin, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capxp-system-tenant"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "hostile"}},
	})
	cfg := rest.CopyConfig(p.Management().Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "hostile", Groups: []string{"system:authenticated"}}
	tc, err := client.New(cfg, client.Options{Scheme: p.Management().Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// The API server's authorizer learns the new binding from its cache:
	// wait until it lets the tenant do what the role says.
	eventually(t, "the tenant's role is in force", 30*time.Second, func() error {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: k8sGroup, Resource: "providerconfigs"},
		}}
		if err := tc.Create(ctx, review); err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("not yet: %s", review.Status.Reason)
		}
		return nil
	})

	// The tenant's own configs: one on a Secret of its namespace (no grant
	// needed), one acting with the provider's ambient identity.
	createAs(ctx, t, tc, providerConfig(k8sGroup, "ProviderConfig", ns, ownConfig, secretCreds(ns)))
	createAs(ctx, t, tc, providerConfig(k8sGroup, "ProviderConfig", ns, ambientConfig, map[string]any{"source": "InjectedIdentity"}))

	var table []attempt
	record := func(name, outcome string) {
		t.Logf("attack %-42s %s", name+":", outcome)
		table = append(table, attempt{name, outcome})
	}
	// refusedOrHeld creates an XR as the tenant: refused at admission with
	// the missing grant named (the clusterctl install's webhook), or
	// admitted and held with it named (every install).
	refusedOrHeld := func(name string, xr *unstructured.Unstructured, missing string) {
		t.Helper()
		err := createRetrying(ctx, tc, xr)
		if err != nil {
			if !strings.Contains(err.Error(), missing) {
				t.Errorf("%s: refused without naming the missing grant %q: %v", name, missing, err)
			}
			record(name, "refused at admission: "+firstLine(err.Error()))
			return
		}
		eventually(t, name+": held, the missing grant named", time.Minute, func() error { return heldFor(ctx, admin, xr, missing) })
		record(name, "held; "+missing)
	}
	xr := func(name string, ref map[string]any, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"providerConfigRef": ref,
			"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"capxp.dev/backend": "local"}}},
		}}}
		u.SetAPIVersion(infrav1.GroupVersion.String())
		u.SetKind("CrossplaneCluster")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetAnnotations(annotations)
		return u
	}
	ref := func(group, kind, name string) map[string]any {
		return map[string]any{"apiGroup": group, "kind": kind, "name": name}
	}
	missingConfig := func(group, name string) string {
		return "a ClusterProviderConfigGrant with providerConfigRef " + group + "/" + name + " covering namespace " + ns + " is missing"
	}

	// The API server loads the bridge's admission policies asynchronously,
	// and learns a new kind's type a moment after it is served: wait until
	// a new XR comes back held.
	eventually(t, "a tenant's new XR is held at admission", time.Minute, func() error {
		probe := xr("probe", ref(k8sGroup, "ProviderConfig", ownConfig), nil)
		if err := tc.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" {
			return fmt.Errorf("admitted without the hold: %v", probe.GetAnnotations())
		}
		return nil
	})

	// Direct references to shared credentials, one per field of the
	// reference that matters: the kind, the group, the name.
	refusedOrHeld("a shared ClusterProviderConfig", xr("direct", ref(k8sGroup, "ClusterProviderConfig", sharedConfig), nil),
		missingConfig(k8sGroup, sharedConfig))
	refusedOrHeld("a legacy cluster-scoped ProviderConfig", xr("legacy", ref(k8sLegacyGroup, "ProviderConfig", legacyConfig), nil),
		missingConfig(k8sLegacyGroup, legacyConfig))
	refusedOrHeld("its own config with an ambient identity", xr("ambient", ref(k8sGroup, "ProviderConfig", ambientConfig), nil),
		"a ClusterProviderConfigGrant with credentialSource "+k8sGroup+"/InjectedIdentity covering namespace "+ns)
	refusedOrHeld("declared externally managed", xr("external", ref(k8sGroup, "ProviderConfig", ambientConfig),
		map[string]string{clusterv1.ManagedByAnnotation: "someone-else"}),
		"a ClusterProviderConfigGrant with credentialSource "+k8sGroup+"/InjectedIdentity")
	chosen := xr("chosen", ref(k8sGroup, "ClusterProviderConfig", sharedConfig), nil)
	_ = unstructured.SetNestedField(chosen.Object, map[string]any{"name": "crossplanecluster-local"}, "spec", "crossplane", "compositionRef")
	refusedOrHeld("a Composition of its choice", chosen, missingConfig(k8sGroup, sharedConfig))

	// Lifting the hold on a held XR (every install admits, then holds, a
	// namespaced config's XR).
	heldXR := xr("ambient", nil, nil)
	for _, patch := range []string{
		`{"metadata":{"annotations":{"crossplane.io/paused":null}}}`,
		`{"metadata":{"annotations":{"crossplane.io/paused":"false"}}}`,
	} {
		err := tc.Patch(ctx, heldXR, client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !strings.Contains(err.Error(), "only CAPXP lifts the hold") {
			t.Errorf("lifting the hold with %s: %v, want a refusal saying only CAPXP lifts it", patch, err)
		}
	}
	record("lifting the hold (patch: removed, false)", "refused at admission: only CAPXP lifts the hold")

	// Granted at admission, then switched to shared credentials.
	switched := xr("switched", ref(k8sGroup, "ProviderConfig", ownConfig), nil)
	if err := createRetrying(ctx, tc, switched); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the switched XR is released", time.Minute, func() error { return released(ctx, admin, switched) })
	err = tc.Patch(ctx, switched, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"providerConfigRef":{"kind":"ClusterProviderConfig","name":"`+sharedConfig+`"}}}`)))
	if err != nil {
		if !strings.Contains(err.Error(), sharedConfig) {
			t.Errorf("switching to shared credentials: refused without naming them: %v", err)
		}
		record("switching credentials after admission", "refused at admission: "+firstLine(err.Error()))
	} else {
		eventually(t, "the switched XR is held", time.Minute, func() error {
			return heldFor(ctx, admin, switched, missingConfig(k8sGroup, sharedConfig))
		})
		record("switching credentials after admission", "held again at admission; "+missingConfig(k8sGroup, sharedConfig))
	}

	// Past the XR's check, to credentials through what is composed: each
	// managed resource is refused at admission by capxp-credentials-where-used
	// (or the XR held first), and the XR says why.
	createAs(ctx, t, tc, providerConfig(k8sGroup, "ProviderConfig", ns, "default", map[string]any{"source": "InjectedIdentity"}))
	createAs(ctx, t, tc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte(envtest.ExecPluginKubeconfig)}})
	createAs(ctx, t, tc, providerConfig(k8sGroup, "ProviderConfig", ns, execConfig,
		map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": "exec-kubeconfig", "key": "kubeconfig"}}))
	another, err := envtest.PatchAndTransform(anotherTeams, schema.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: infrav1.GroupVersion.Version, Kind: "CrossplaneCluster"},
		map[string]any{"name": "hard-coded", "base": map[string]any{
			"apiVersion": k8sGroup + "/" + k8sVersion, "kind": "Object",
			"spec": map[string]any{
				"managementPolicies": []any{"Observe"},
				"providerConfigRef":  map[string]any{"kind": "ClusterProviderConfig", "name": sharedConfig},
				"forProvider":        map[string]any{"manifest": map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "default"}}},
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	createAs(ctx, t, admin, another)
	refusedWhereUsed := func(name string, xr *unstructured.Unstructured, why string) {
		t.Helper()
		if err := createRetrying(ctx, tc, xr); err != nil {
			if !strings.Contains(err.Error(), why) {
				t.Errorf("%s: refused without saying %q: %v", name, why, err)
			}
			record(name, "refused at admission: "+firstLine(err.Error()))
			return
		}
		var outcome string
		eventually(t, name+": refused where used, or held", 2*time.Minute, func() error {
			if heldFor(ctx, admin, xr, why) == nil {
				outcome = "held; " + why
				return nil
			}
			got := xr.DeepCopy()
			if err := admin.Get(ctx, client.ObjectKeyFromObject(xr), got); err != nil {
				return err
			}
			msg := conditionMessage(got, "Synced")
			if !strings.Contains(msg, policies.CredentialsPolicyName) || !strings.Contains(msg, why) {
				return fmt.Errorf("Synced says %q", msg)
			}
			outcome = "composed nothing: Synced=False, " + policies.CredentialsPolicyName + " refused the managed resource: " + why
			return nil
		})
		record(name, outcome)
	}
	refusedWhereUsed("no reference; its own ProviderConfig default made ambient", xr("unset", nil, nil),
		"ProviderConfig "+k8sGroup+"/default uses spec.credentials.source InjectedIdentity")
	picked := xr("picked", ref(k8sGroup, "ProviderConfig", ownConfig), nil)
	_ = unstructured.SetNestedField(picked.Object, map[string]any{"name": anotherTeams}, "spec", "crossplane", "compositionRef")
	refusedWhereUsed("its own config; another team's Composition hard-coding shared credentials", picked,
		"ClusterProviderConfig "+k8sGroup+"/"+sharedConfig+": no ClusterProviderConfigGrant allows it")
	refusedWhereUsed("its own config on a kubeconfig running an exec plugin", xr("exec", ref(k8sGroup, "ProviderConfig", execConfig), nil), `user "u": exec`)

	// What the bridge judged its own stays what it judged: the Secret the
	// own config reads, and the config, are locked.
	lockedSecret := &corev1.Secret{}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workload"}, lockedSecret); err != nil {
		t.Fatal(err)
	}
	lockedSecret.Data["kubeconfig"] = []byte(envtest.ExecPluginKubeconfig)
	err = tc.Update(ctx, lockedSecret)
	if err == nil || !strings.Contains(err.Error(), "is locked") {
		t.Errorf("editing the Secret of its usable config into an exec plugin: %v, want a refusal saying it is locked", err)
	}
	lockedConfig := providerConfig(k8sGroup, "ProviderConfig", ns, ownConfig, nil)
	if err := tc.Get(ctx, client.ObjectKeyFromObject(lockedConfig), lockedConfig); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(lockedConfig.Object, "InjectedIdentity", "spec", "credentials", "source")
	if err2 := tc.Update(ctx, lockedConfig); err2 == nil || !strings.Contains(err2.Error(), "is locked") {
		t.Errorf("turning its usable config ambient: %v, want a refusal saying it is locked", err2)
	}
	record("editing a usable config's Secret (exec) or spec (ambient)", "refused at admission: "+firstLine(err.Error()))

	// Only the bridge marks the holds it lifts.
	// (On an XR the bridge released: on a held one, the marker is there.)
	err = tc.Patch(ctx, xr("exec", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+infrav1.CredentialsHoldAnnotation+`":"true"}}}`)))
	if err == nil || !strings.Contains(err.Error(), "only CAPXP marks the holds it lifts") {
		t.Errorf("setting the bridge's hold marker: %v, want a refusal", err)
	} else {
		record("setting the bridge's hold marker on its XR", "refused at admission: "+firstLine(err.Error()))
	}

	// Resource references to what the XR does not control: a shared config,
	// a Secret, the platform's namespace's objects. Data, not instructions.
	before := &unstructured.Unstructured{}
	before.SetAPIVersion(k8sGroup + "/" + k8sVersion)
	before.SetKind("ClusterProviderConfig")
	if err := admin.Get(ctx, client.ObjectKey{Name: sharedConfig}, before); err != nil {
		t.Fatal(err)
	}
	refs, err := json.Marshal(map[string]any{"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
		map[string]any{"apiVersion": k8sGroup + "/" + k8sVersion, "kind": "ClusterProviderConfig", "name": sharedConfig},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "workload"},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "clusterproviderconfigs." + k8sGroup},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.Patch(ctx, switched, client.RawPatch(types.MergePatchType, refs)); err != nil {
		t.Fatalf("writing resourceRefs: %v", err)
	}

	// Switching the check off instead of getting past it: a config of its
	// own the bridge cannot read (its Secret's name is no name) stays
	// beside the revocation below, which must still land within 5 s; a
	// <cluster>-kubeconfig Secret that would have CAPI's controllers send
	// their own token where the tenant says.
	createAs(ctx, t, tc, providerConfig(k8sGroup, "ProviderConfig", ns, "malformed",
		map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": "a/b", "key": "kubeconfig"}}))
	eventually(t, "the malformed config is refused, named", time.Minute, func() error {
		rec := &infrav1.NamespaceCredentials{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec); err != nil {
			return err
		}
		for _, r := range rec.Spec.Refused {
			if r.Name == "malformed" && r.Reason == infrav1.CredentialsSecretUnreadableReason {
				return nil
			}
		}
		return fmt.Errorf("not refused as %s: %+v", infrav1.CredentialsSecretUnreadableReason, rec.Spec.Refused)
	})
	record("its own config naming Secret a/b (the record froze)", "refused as "+infrav1.CredentialsSecretUnreadableReason+"; the revocation below still lands")
	stolen := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked-kubeconfig"}, Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": []byte(`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://tenant.example:6443"}}],` +
			`"users":[{"name":"u","user":{"tokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token"}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}`)}}
	err = tc.Create(ctx, stolen)
	if err == nil || !strings.Contains(err.Error(), policies.KubeconfigPolicyName) {
		t.Errorf("a <cluster>-kubeconfig Secret naming CAPI's token file: %v, want a refusal by %s", err, policies.KubeconfigPolicyName)
	} else {
		record("a <cluster>-kubeconfig Secret naming a token file", "refused at admission: "+firstLine(err.Error()))
	}

	// A grant revoked while what it covered runs: the XR is held and what
	// it composed is paused within 5 s.
	revoked := xr("revoked", ref(k8sGroup, "ClusterProviderConfig", revocableConfig), nil)
	if err := createRetrying(ctx, tc, revoked); err != nil {
		t.Fatal(err)
	}
	createAs(ctx, t, tc, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneCluster", Name: "revoked"}},
	})
	eventually(t, "the granted cluster is provisioned", 2*time.Minute, func() error {
		cl := &clusterv1.Cluster{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "revoked"}, cl); err != nil {
			return err
		}
		if !ptrTrue(cl.Status.Initialization.InfrastructureProvisioned) {
			return fmt.Errorf("not provisioned")
		}
		return nil
	})
	composed := objectsOf(ctx, t, admin)
	if len(composed) == 0 {
		t.Fatal("the granted XR composed nothing")
	}
	// CAPI pauses the cluster first: revocation reaches what it composed
	// whatever state its XR is in.
	setPaused := func(paused bool) {
		t.Helper()
		if err := admin.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"}},
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)))); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	eventually(t, "the paused cluster's XR is paused", time.Minute, func() error {
		got := revoked.DeepCopy()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(revoked), got); err != nil {
			return err
		}
		if got.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" {
			return fmt.Errorf("not paused")
		}
		return nil
	})
	if err := admin.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	revokedSince = revokedAt
	// Paused for the move already: found by the credentials it names, and
	// marked, within 5 s.
	eventually(t, "what the revoked XR composed is paused and marked within 5 s", 5*time.Second, func() error {
		for _, o := range objectsOf(ctx, t, admin) {
			if o.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" || o.GetLabels()[infrav1.CredentialsRevokedLabel] == "" {
				return fmt.Errorf("%s %s is not paused and marked: %v %v", o.GetKind(), o.GetName(), o.GetAnnotations(), o.GetLabels())
			}
		}
		return nil
	})
	pausedAfter := time.Since(revokedAt)
	setPaused(false)
	eventually(t, "the revoked XR is held, the missing grant named", time.Minute, func() error {
		return heldFor(ctx, admin, revoked, missingConfig(k8sGroup, revocableConfig))
	})
	generations := map[string]int64{}
	for _, o := range objectsOf(ctx, t, admin) {
		generations[o.GetName()] = o.GetGeneration()
	}
	record("a grant revoked while CAPI pauses the cluster", fmt.Sprintf("%d composed resources paused %s after the revocation, found by the credentials they name; once resumed, the XR held", len(composed), pausedAfter.Round(10*time.Millisecond)))

	// Nothing the tenant referenced was touched.
	after := before.DeepCopy()
	if err := admin.Get(ctx, client.ObjectKey{Name: sharedConfig}, after); err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the shared config a tenant's resourceRefs named was written to (resourceVersion %s -> %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(extCRD)
	if err := admin.Get(ctx, client.ObjectKey{Name: "clusterproviderconfigs." + k8sGroup}, crd); err != nil {
		t.Fatal(err)
	}
	if _, ok := crd.GetLabels()[infrav1.ClusterctlLabel]; ok {
		t.Errorf("a tenant's resourceRefs had the bridge label the CRD clusterproviderconfigs.%s", k8sGroup)
	}
	record("resourceRefs naming a shared config, a Secret, a CRD", "read as data: nothing named was written, labelled or paused")

	// Deleting the cluster while its grant is revoked: the provider would
	// delete with credentials the namespace may no longer use, so what the
	// XR composed stays paused until a grant returns; then all of it goes.
	if err := admin.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revoked"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	waiting := objectsOf(ctx, t, admin)
	if len(waiting) != len(composed) {
		t.Errorf("the revoked XR's composed resources went while its grant was revoked: %d of %d left", len(waiting), len(composed))
	}
	for _, o := range waiting {
		if o.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" {
			t.Errorf("%s %s was unpaused for its deletion while the grant was revoked", o.GetKind(), o.GetName())
		}
	}
	regrant := grant.DeepCopy()
	regrant.ResourceVersion, regrant.Name = "", "hostile-regranted"
	createAs(ctx, t, admin, regrant)
	regrantedAt = time.Now()
	eventually(t, "the revoked cluster, once granted again, is deleted with all it composed", 2*time.Minute, func() error {
		if left := objectsOf(ctx, t, admin); len(left) > 0 {
			return fmt.Errorf("%d composed resources left", len(left))
		}
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "revoked"}, &clusterv1.Cluster{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster is still there: %v", err)
		}
		return nil
	})
	record("deleting a cluster whose grant was revoked", "waits, what it composed paused, until a grant returns; then all of it is deleted")

	// The tenant deletes what it created; nothing is left behind.
	for _, name := range []string{"direct", "legacy", "ambient", "external", "chosen", "switched", "unset", "picked", "exec"} {
		if err := client.IgnoreNotFound(tc.Delete(ctx, xr(name, nil, nil))); err != nil {
			t.Errorf("the tenant cannot delete its XR %s: %v", name, err)
		}
	}
	eventually(t, "the tenant's XRs are gone", 2*time.Minute, func() error {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(infrav1.GroupVersion.String())
		l.SetKind("CrossplaneClusterList")
		if err := admin.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d left, %s first", len(l.Items), l.Items[0].GetName())
		}
		return nil
	})
	if err := admin.Delete(ctx, regrant); err != nil {
		t.Fatal(err)
	}

	squatAnotherNamespacesMachine(ctx, t, p, tc, record)

	// Let anything that would compose have a chance to, then count.
	time.Sleep(2 * time.Second)
	// A reconcile Crossplane began before the hold may apply the composed
	// resources once more, unchanged: they stay paused, their spec as it was.
	for _, o := range objectsOf(ctx, t, admin) {
		if o.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" || o.GetGeneration() != generations[o.GetName()] {
			t.Errorf("%s %s of the revoked XR changed after its pause: paused=%q, generation %d -> %d", o.GetKind(), o.GetName(),
				o.GetAnnotations()[infrav1.CrossplanePausedAnnotation], generations[o.GetName()], o.GetGeneration())
		}
	}
	ungranted, positive, examples, err := countManagedWrites(p.ManagementAuditLog(), start, func(at time.Time, group, kind, name string) bool {
		switch {
		case group == k8sGroup && kind == "ProviderConfig" && name == ownConfig:
			return true
		case group == k8sGroup && kind == "ClusterProviderConfig" && name == revocableConfig:
			return revokedSince.IsZero() || at.Before(revokedSince) || !regrantedAt.IsZero() && at.After(regrantedAt)
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if positive == 0 {
		t.Errorf("the audit log shows no write of a managed resource naming granted credentials: the count below proves nothing")
	}
	if ungranted != 0 {
		t.Errorf("%d creates or updates of managed resources named ungranted credentials: %v", ungranted, examples)
	}
	record("audit log, whole run", fmt.Sprintf("%d creates or updates of managed resources naming ungranted credentials (of %d naming credentials)",
		ungranted, ungranted+positive))
	var rows strings.Builder
	for _, a := range table {
		fmt.Fprintf(&rows, "| %s | %s |\n", a.name, a.outcome)
	}
	t.Logf("the attack, as docs/tenancy.md tabulates it:\n%s", rows.String())
}

var extCRD = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// legacyCRD installs the legacy cluster-scoped ProviderConfig kind of
// provider-kubernetes where the plane has not (its clusterctl mode installs
// the namespaced kinds only), from the package the plane runs.
func legacyCRD(t *testing.T, p *plane.Plane) {
	t.Helper()
	_, err := p.Management().Client.RESTMapper().RESTMapping(schema.GroupKind{Group: k8sLegacyGroup, Kind: "ProviderConfig"}, k8sVersion)
	if !apimeta.IsNoMatchError(err) {
		return
	}
	pk, err := packages.Find("xpkg.crossplane.io/crossplane-contrib/provider-kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	const file = "crds/kubernetes.crossplane.io_providerconfigs.yaml"
	dir, err := tools.Dir(envtest.ToolsDir()).PackageFile(pk.Name(), pk.Version, file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrlenvtest.InstallCRDs(p.Management().Config, ctrlenvtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, file)}}); err != nil {
		t.Fatal(err)
	}
}

func secretCreds(ns string) map[string]any {
	return map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": "workload", "key": "kubeconfig"}}
}

func providerConfig(group, kind, ns, name string, credentials map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": credentials}}}
	u.SetAPIVersion(group + "/" + k8sVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createAs creates an object with a client. A kind just served may be
// unknown to the client for a moment, and to the admission policies that
// match it (503) too: it retries then, as a kubectl user would.
func createAs(ctx context.Context, t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	eventually(t, "create "+o.GetName(), 30*time.Second, func() error {
		err := c.Create(ctx, o)
		if err != nil && !apimeta.IsNoMatchError(err) && !apierrors.IsServiceUnavailable(err) && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("cannot create %s: %v", o.GetName(), err)
		}
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// createRetrying creates an XR, retrying while the API server answers 503
// for a kind it is still learning, as a kubectl user would.
func createRetrying(ctx context.Context, c client.Client, o client.Object) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, o)
		if err == nil || !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// heldFor returns nil once an XR is paused, Crossplane reports it composes
// nothing, and a Warning event on it names what is missing.
func heldFor(ctx context.Context, c client.Client, xr *unstructured.Unstructured, missing string) error {
	got := xr.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(xr), got); err != nil {
		return err
	}
	if got.GetAnnotations()[infrav1.CrossplanePausedAnnotation] != "true" {
		return fmt.Errorf("not paused")
	}
	if synced := conditionReason(got, "Synced"); synced != "ReconcilePaused" {
		return fmt.Errorf("Synced is %q, not ReconcilePaused", synced)
	}
	if missing == "" {
		return nil
	}
	evs := &corev1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(xr.GetNamespace())); err != nil {
		return err
	}
	for i := range evs.Items {
		e := &evs.Items[i]
		if e.InvolvedObject.Name == xr.GetName() && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, missing) {
			return nil
		}
	}
	return fmt.Errorf("no Warning event names %q", missing)
}

// released returns nil once the bridge lifted the hold it admitted an XR
// with.
func released(ctx context.Context, c client.Client, xr *unstructured.Unstructured) error {
	got := xr.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(xr), got); err != nil {
		return err
	}
	if _, ok := got.GetAnnotations()[infrav1.CrossplanePausedAnnotation]; ok {
		return fmt.Errorf("still held")
	}
	return nil
}

func conditionReason(u *unstructured.Unstructured, typ string) string {
	r, _ := condition(u, typ)["reason"].(string)
	return r
}

// condition is u's condition of type typ, nil when it has none.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// objectsOf lists the provider-kubernetes Objects the revoked XR composed.
func objectsOf(ctx context.Context, t *testing.T, c client.Client) []unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(k8sGroup + "/" + k8sVersion)
	l.SetKind("ObjectList")
	if err := c.List(ctx, l, client.InNamespace(hostileNamespace), client.MatchingLabels{"crossplane.io/composite": "revoked"}); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// countManagedWrites reads an audit log for the successful writes since
// start that set or change a managed resource's credentials in the tenant's
// namespace (provider-kubernetes' groups): every create (an apply that
// creates included), and every other write whose stored
// spec.providerConfigRef differs from the one the resource had before (the
// audit policy records what was stored, defaults applied). Each is judged
// by the credentials it names: allowed says whether the namespace could use
// them then. granted counts the others, which shows the log records such
// writes at all; examples names the first ungranted ones.
func countManagedWrites(path string, start time.Time, allowed func(at time.Time, group, kind, name string) bool) (ungranted, granted int, examples []string, err error) {
	f, err := localkube.OpenAuditLog(path)
	if err != nil {
		return 0, 0, nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 1<<20), 16<<20)
	stored := map[string]string{}
	for s.Scan() {
		e := auditv1.Event{}
		if json.Unmarshal(s.Bytes(), &e) != nil || e.ObjectRef == nil || e.ResponseStatus == nil || e.ResponseObject == nil {
			continue
		}
		r := e.ObjectRef
		if (r.APIGroup != k8sGroup && r.APIGroup != k8sLegacyGroup) || r.Namespace != hostileNamespace || e.Stage != auditv1.StageResponseComplete ||
			e.ResponseStatus.Code >= 300 || strings.Contains(r.Resource, "providerconfig") || (e.Verb != "create" && e.Verb != "update" && e.Verb != "patch") {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(e.ResponseObject.Raw); err != nil || obj.GetName() == "" || obj.Object["spec"] == nil {
			// A metadata-only answer (the bridge patches composed
			// resources' metadata as PartialObjectMetadata) says nothing
			// of the credentials, and changes none.
			continue
		}
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "providerConfigRef", "kind")
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "providerConfigRef", "name")
		key, ref := r.Resource+"/"+obj.GetName(), kind+"/"+name
		before, seen := stored[key]
		stored[key] = ref
		created := e.Verb == "create" || e.Verb == "patch" && e.ResponseStatus.Code == 201
		if e.RequestReceivedTimestamp.Time.Before(start) || !created && seen && before == ref {
			continue
		}
		if allowed(e.RequestReceivedTimestamp.Time, r.APIGroup, kind, name) {
			granted++
			continue
		}
		ungranted++
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf("%s %s %s/%s naming %s %s by %s", e.Verb, r.Resource, r.Namespace, r.Name, kind, name, e.User.Username))
		}
	}
	return ungranted, granted, examples, s.Err()
}

// conditionMessage is the message of u's condition of type typ.
func conditionMessage(u *unstructured.Unstructured, typ string) string {
	msg, _ := condition(u, typ)["message"].(string)
	return msg
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
