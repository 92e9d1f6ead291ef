package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
)

// The tenancy record's reconcile, one namespace at a time, against a fake
// API server: what it writes and when it comes back, whatever a tenant
// puts in its namespace and whatever the API server answers.
func TestNamespaceCredentialsReconcile(t *testing.T) {
	const ns, group = "team-a", "creds.test"
	provider := credentials.Provider{ConfigGroup: group, ManagedGroup: "test.capxp.dev", Secret: credentials.SecretKubeconfig}
	stubGVK := schema.GroupVersionKind{Group: "test.capxp.dev", Version: "v1alpha1", Kind: "Stub"}
	pcGVK := schema.GroupVersionKind{Group: group, Version: "v1beta1", Kind: "ProviderConfig"}
	cpc := infrav1.UsableConfig{APIGroup: group, Kind: infrav1.ProviderConfigKindCluster, Name: "shared"}
	own := infrav1.UsableConfig{APIGroup: group, Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"}
	ownLocks := []infrav1.LockedObject{{APIGroup: group, Kind: "ProviderConfig", Name: "mine"}, {Kind: "Secret", Name: "mine"}}
	staticKubeconfig := `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://h:1"}}],"users":[{"name":"u","user":{"token":"t"}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}`

	providerConfig := func(name, secret string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
			"source": "Secret", "secretRef": map[string]any{"name": secret, "key": "kubeconfig"}}}}}
		u.SetGroupVersionKind(pcGVK)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	secret := func(name, kubeconfig string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": []byte(kubeconfig)}}
	}
	grant := &infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: infrav1.ClusterProviderConfigGrantSpec{
		ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: group, Name: "shared"}, AllowedNamespaces: infrav1.AllowedNamespaces{Names: []string{ns}}}}
	record := func(spec infrav1.NamespaceCredentialsSpec, annotations map[string]string) *infrav1.NamespaceCredentials {
		return &infrav1.NamespaceCredentials{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName, Annotations: annotations}, Spec: spec}
	}
	stub := func(config string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": config}}}}
		u.SetGroupVersionKind(stubGVK)
		u.SetNamespace(ns)
		u.SetName("running")
		return u
	}
	marked := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetAnnotations(map[string]string{infrav1.CrossplanePausedAnnotation: "true"})
		u.SetLabels(map[string]string{infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedPaused})
		return u
	}
	stubCRD := &extv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "stubs.test.capxp.dev"}}
	internal := apierrors.NewInternalError(errFake("etcd is slow"))
	ago := func(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339Nano) }

	type want struct {
		err bool
		// requeue bounds the result's RequeueAfter: 0 wants none. A record
		// that admits less (or is new) comes back after revocationSettles
		// to pause once more what a create admitted just before it may have
		// stored.
		requeue time.Duration
		// configs and refused (name -> reason) are the record's.
		configs []infrav1.UsableConfig
		refused map[string]string
		locked  []infrav1.LockedObject
		// marked: the record carries the lock mark.
		marked bool
		// paused: the Stub is paused; resumed: it is not, nor marked.
		paused, resumed bool
	}
	cases := map[string]struct {
		reason string
		objs   []client.Object
		// secretErr and listErr make reading a Secret, or listing the
		// namespace's ProviderConfigs, fail.
		secretErr, listErr error
		want               want
	}{
		"FirstRecord": {
			reason: "a namespace without a record gets one, listing what the grants give it",
			objs:   []client.Object{grant},
			want:   want{requeue: revocationSettles, configs: []infrav1.UsableConfig{cpc}},
		},
		"InvalidSecretName": {
			reason: "a config naming a Secret the API server cannot look up is refused, without a request; the grant is listed",
			objs:   []client.Object{grant, providerConfig("slash", "a/b")},
			want:   want{requeue: revocationSettles, configs: []infrav1.UsableConfig{cpc}, refused: map[string]string{"slash": infrav1.CredentialsSecretUnreadableReason}},
		},
		"SecretReadFails": {
			reason:    "a Secret that cannot be read refuses its config alone, and is read again within seconds",
			objs:      []client.Object{grant, providerConfig("mine", "mine"), secret("mine", staticKubeconfig)},
			secretErr: internal,
			want:      want{requeue: unreadableRecheck, configs: []infrav1.UsableConfig{cpc}, refused: map[string]string{"mine": infrav1.CredentialsSecretUnreadableReason}},
		},
		"NewConfigLockedFirst": {
			reason: "a config judged usable is locked first, not listed, and judged again once the lock is in force",
			objs:   []client.Object{grant, providerConfig("mine", "mine"), secret("mine", staticKubeconfig)},
			want:   want{requeue: lockSettles, configs: []infrav1.UsableConfig{cpc}, locked: ownLocks, marked: true},
		},
		"LockNotInForceYet": {
			reason: "until the lock is in force, nothing is judged",
			objs: []client.Object{grant, providerConfig("mine", "mine"), secret("mine", staticKubeconfig),
				record(infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{cpc}, Locked: ownLocks}, map[string]string{lockedAnnotation: ago(0)})},
			want: want{requeue: lockSettles, configs: []infrav1.UsableConfig{cpc}, locked: ownLocks, marked: true},
		},
		"JudgedAgainOnceLocked": {
			reason: "once the lock is in force, what it keeps is judged again and listed",
			objs: []client.Object{grant, providerConfig("mine", "mine"), secret("mine", staticKubeconfig),
				record(infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{cpc}, Locked: ownLocks}, map[string]string{lockedAnnotation: ago(time.Minute)})},
			want: want{configs: []infrav1.UsableConfig{cpc, own}, locked: ownLocks},
		},
		"SwappedBeforeTheLock": {
			reason: "a Secret swapped for an exec kubeconfig before the lock was in force is judged as it is now, and refused",
			objs: []client.Object{grant, providerConfig("mine", "mine"), secret("mine", `{"users":[{"name":"u","user":{"exec":{"command":"sh"}}}]}`),
				record(infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{cpc}, Locked: ownLocks}, map[string]string{lockedAnnotation: ago(time.Minute)})},
			want: want{configs: []infrav1.UsableConfig{cpc}, refused: map[string]string{"mine": infrav1.SharedIdentityInSecretReason}},
		},
		"RevokedWhileConfigsCannotBeListed": {
			reason: "a grant revoked while the namespace's configs cannot be judged leaves the record, and what ran on it is paused",
			objs: []client.Object{stubCRD, stub("shared"), providerConfig("mine", "mine"),
				record(infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{cpc, own}, Locked: ownLocks}, nil)},
			listErr: internal,
			want:    want{err: true, configs: []infrav1.UsableConfig{own}, locked: ownLocks, paused: true},
		},
		"Regranted": {
			reason: "a grant given again admits more and refuses nothing new: what the bridge paused for it resumes, with no second pass",
			objs: []client.Object{grant, stubCRD, marked(stub("shared")),
				record(infrav1.NamespaceCredentialsSpec{}, nil)},
			want: want{configs: []infrav1.UsableConfig{cpc}, resumed: true},
		},
		"Revoked": {
			reason: "a revoked grant leaves the record and what ran on it is paused",
			objs: []client.Object{stubCRD, stub("shared"),
				record(infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{cpc}}, nil)},
			want: want{requeue: revocationSettles, paused: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{pcGVK.GroupVersion(), stubGVK.GroupVersion()})
			mapper.Add(pcGVK, meta.RESTScopeNamespace)
			mapper.Add(stubGVK, meta.RESTScopeNamespace)
			mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
			mapper.Add(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), meta.RESTScopeRoot)
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithRESTMapper(mapper).
				WithObjects(append(tc.objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})...).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, ok := obj.(*corev1.Secret); ok && tc.secretErr != nil {
							return tc.secretErr
						}
						if strings.Contains(key.Name, "/") {
							t.Errorf("%s: a request for %q", tc.reason, key.Name)
						}
						return c.Get(ctx, key, obj, opts...)
					},
					List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if u, ok := list.(*unstructured.UnstructuredList); ok && u.GetKind() == "ProviderConfigList" && tc.listErr != nil {
							return tc.listErr
						}
						return c.List(ctx, list, opts...)
					},
				}).Build()
			r := NewRecords(c, c, []credentials.Provider{provider})

			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
			g.Expect(err != nil).To(Equal(tc.want.err), "%s: Reconcile error %v", tc.reason, err)
			if tc.want.requeue == 0 {
				g.Expect(res.RequeueAfter).To(BeZero(), tc.reason)
			} else {
				g.Expect(res.RequeueAfter).To(And(BeNumerically(">", 0), BeNumerically("<=", tc.want.requeue)), tc.reason)
			}

			rec := &infrav1.NamespaceCredentials{}
			g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed(), tc.reason)
			if tc.want.configs == nil {
				g.Expect(rec.Spec.Configs).To(BeEmpty(), tc.reason)
			} else {
				g.Expect(rec.Spec.Configs).To(Equal(tc.want.configs), tc.reason)
			}
			refused := map[string]string{}
			for _, r := range rec.Spec.Refused {
				refused[r.Name] = r.Reason
			}
			if tc.want.refused == nil {
				tc.want.refused = map[string]string{}
			}
			g.Expect(refused).To(Equal(tc.want.refused), tc.reason)
			if tc.want.locked == nil {
				g.Expect(rec.Spec.Locked).To(BeEmpty(), tc.reason)
			} else {
				g.Expect(rec.Spec.Locked).To(ConsistOf(tc.want.locked), tc.reason)
			}
			if tc.want.marked {
				g.Expect(rec.GetAnnotations()).To(HaveKey(lockedAnnotation), tc.reason)
			} else {
				g.Expect(rec.GetAnnotations()).NotTo(HaveKey(lockedAnnotation), tc.reason)
			}
			if tc.want.resumed {
				s := stub("")
				g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(s), s)).To(Succeed())
				g.Expect(s.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation), tc.reason)
				g.Expect(s.GetLabels()).NotTo(HaveKey(infrav1.CredentialsRevokedLabel), tc.reason)
			}
			if tc.want.paused {
				s := stub("")
				g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(s), s)).To(Succeed())
				g.Expect(s.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"), tc.reason)
				g.Expect(s.GetLabels()).To(HaveKey(infrav1.CredentialsRevokedLabel), tc.reason)
			}
		})
	}
}

// scheme is the manager's.
func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := contracts.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

type errFake string

func (e errFake) Error() string { return string(e) }
