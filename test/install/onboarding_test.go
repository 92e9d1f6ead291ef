package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// onboardATeam runs docs/tenancy.md's onboarding recipe as written: the
// team's namespace, role, own credentials and a grant of the shared config
// the platform runs; the namespace's record then lists both configs. Then
// the revocation: the shared config leaves the record, the team's own stays.
func onboardATeam(ctx context.Context, t *testing.T, p *plane.Plane) {
	t.Helper()
	admin := p.Management().Client
	// What the recipe takes as given: the platform's shared config (its
	// Secret in a namespace of the platform's), and the kubeconfig file of
	// the team's credentials.
	const platform = "platform-shared"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platform}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "workload"}, Data: map[string][]byte{"kubeconfig": p.Workload.Kubeconfig}},
		providerConfig(k8sGroup, "ClusterProviderConfig", "", "shared", secretCreds(platform)),
	} {
		createAs(ctx, t, admin, o)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "team-c.kubeconfig"), p.Workload.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	const page, ns = "docs/tenancy.md", "team-c"
	own := infrav1.UsableConfig{APIGroup: k8sGroup, Kind: "ProviderConfig", Name: "workload"}
	granted := infrav1.UsableConfig{APIGroup: k8sGroup, Kind: "ClusterProviderConfig", Name: "shared"}
	lists := func(want, notWant []infrav1.UsableConfig) func() error {
		return func() error {
			r := &infrav1.NamespaceCredentials{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "credentials"}, r); err != nil {
				return err
			}
			for _, c := range want {
				if !slices.Contains(r.Spec.Configs, c) {
					return fmt.Errorf("the record of %s lists %+v, not %+v", ns, r.Spec.Configs, c)
				}
			}
			for _, c := range notWant {
				if slices.Contains(r.Spec.Configs, c) {
					return fmt.Errorf("the record of %s still lists %+v", ns, c)
				}
			}
			return nil
		}
	}
	runDoc(ctx, t, p, page, "onboard", dir)
	eventually(t, "the onboarded namespace's record lists its own config and the granted one", time.Minute, lists([]infrav1.UsableConfig{own, granted}, nil))
	runDoc(ctx, t, p, page, "revoke", dir)
	eventually(t, "the revoked grant's config leaves the record; the team's own stays", time.Minute, lists([]infrav1.UsableConfig{own}, []infrav1.UsableConfig{granted}))
}
