package envtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

// Environment is a running kube-apiserver and etcd with CAPXP's world
// loaded: the local plane's API server (dev/localkube), with helpers
// for tests.
type Environment struct {
	*localkube.Environment

	env *ctrlenvtest.Environment
	// crossplane is the real Crossplane and its functions, and provider the
	// integration tests' provider, when StartWithCrossplane started them.
	crossplane *plane.Crossplane
	provider   *Manager
}

// NewScheme returns the manager's scheme: the tests use the types the
// manager knows.
func NewScheme() *runtime.Scheme { return controllers.NewScheme() }

// AssetsDir is where the kube-apiserver and etcd binaries are: the
// KUBEBUILDER_ASSETS directory, or the one hack/ensure-tools.sh fills.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(ToolsDir(), "assets")
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", errors.Errorf("%s is missing from %s: run `make tools` to build it from the Go module proxy (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	return dir, nil
}

// Start starts the API server and installs CAPI's and Crossplane's CRDs,
// CAPXP's template CRDs and CAPXP's XRDs (as XRD objects and as the CRDs
// Crossplane would generate from them), with no Crossplane running: for
// tests of what Crossplane reads, such as rendered Compositions.
func Start(ctx context.Context) (*Environment, error) {
	return startEnv(ctx, "", 0, nil)
}

// StartWithCrossplane starts the API server, the real Crossplane core and
// composition functions (dev/plane, as `make dev` runs them, logging
// into dir) and the integration tests' Provider, which observes composed
// Stubs providerDelay after their creation. It installs CAPXP's XRDs, each
// defaulting to the integration tests' Composition for its kind, and
// Crossplane generates their CRDs and composes their XRs.
func StartWithCrossplane(ctx context.Context, dir string, providerDelay time.Duration) (*Environment, error) {
	return startEnv(ctx, dir, providerDelay, nil)
}

// StartWithCrossplaneOn is StartWithCrossplane on an API server started
// with extra flags (by name without the dashes): for tests of an API server
// that lacks something CAPXP relies on.
func StartWithCrossplaneOn(ctx context.Context, dir string, providerDelay time.Duration, apiServerFlags map[string]string) (*Environment, error) {
	return startEnv(ctx, dir, providerDelay, apiServerFlags)
}

func startEnv(ctx context.Context, crossplaneDir string, providerDelay time.Duration, apiServerFlags map[string]string) (*Environment, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	capi, err := Required(capiModule)
	if err != nil {
		return nil, err
	}
	xp, err := Required(CrossplaneModule)
	if err != nil {
		return nil, err
	}
	o, err := linked(localkube.Options{Assets: assets})
	if err != nil {
		return nil, err
	}
	le, err := localkube.Start(localkube.Options{
		Assets:    assets,
		Etcd:      o.Etcd,
		APIServer: o.APIServer,
		Scheme:    NewScheme(),
		CRDPaths: []string{
			filepath.Join(capi.Dir, "core", "config", "crd", "bases"),
			filepath.Join(xp.Dir, "cluster", "crds"),
			filepath.Join(RepoRoot(), "config", "crd", "bases"),
			filepath.Join(RepoRoot(), "test", "envtest", "testdata", "crds"),
		},
		// Serving certificates for the bridge's admission webhook; the
		// bridge registers the webhook configuration itself.
		Webhooks:       true,
		APIServerFlags: apiServerFlags,
	})
	if err != nil {
		return nil, err
	}
	e := &Environment{Environment: le, env: le.Envtest}
	if crossplaneDir != "" {
		if e.crossplane, err = plane.StartCrossplane(ctx, plane.CrossplaneOptions{Config: le.Config, Dir: crossplaneDir, Tools: tools.Dir(ToolsDir())}); err != nil {
			_ = e.Stop()
			return nil, err
		}
		if e.provider, err = e.startProvider(ctx, providerDelay); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	xrds, err := ReadXRDs(filepath.Join(RepoRoot(), "compositions", "xrds"))
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	for _, xrd := range xrds {
		if _, err := e.InstallXRD(ctx, xrd); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// webhookServing is where a test manager serves admission webhooks, and how
// the API server reaches it.
func (e *Environment) webhookServing() (crwebhook.Options, *webhook.ClientConfig) {
	w := e.env.WebhookInstallOptions
	return crwebhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir},
		&webhook.ClientConfig{URL: "https://" + net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)), CABundle: w.LocalServingCAData}
}

// ReadXRDs reads every XRD manifest in dir.
func ReadXRDs(dir string) ([]*xpextv2.CompositeResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, errors.Wrap(err, "cannot list XRDs")
	}
	sort.Strings(files)
	out := make([]*xpextv2.CompositeResourceDefinition, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read %s", f)
		}
		xrd := &xpextv2.CompositeResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, xrd); err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", f)
		}
		out = append(out, xrd)
	}
	return out, nil
}

// Stop stops Crossplane and the provider, if running, then the API server.
func (e *Environment) Stop() error {
	if e.provider != nil {
		_ = e.provider.Stop()
	}
	if e.crossplane != nil {
		e.crossplane.Stop()
	}
	return e.Environment.Stop()
}

// CrossplaneRunning returns nil while Crossplane's processes run, else what
// ended them.
func (e *Environment) CrossplaneRunning() error {
	if e.crossplane == nil {
		return errors.New("this environment runs no Crossplane")
	}
	return e.crossplane.Running()
}

// InstallXRD creates an XRD and returns its CRD, established. With
// Crossplane running, the XRD defaults to the integration tests' Composition
// for its kind (created here) and Crossplane's XRD controller generates the
// CRD; InstallXRD waits until Crossplane reports the XRD established, that
// is, composing. Without Crossplane it generates the CRD as Crossplane's XRD
// controller would, with crossplane-runtime's xcrd, and installs it.
func (e *Environment) InstallXRD(ctx context.Context, xrd *xpextv2.CompositeResourceDefinition) (*extv1.CustomResourceDefinition, error) {
	xrd = xrd.DeepCopy()
	if e.crossplane != nil {
		return e.installXRDWithCrossplane(ctx, xrd)
	}
	if err := e.Client.Create(ctx, xrd); err != nil {
		return nil, errors.Wrapf(err, "cannot create XRD %s", xrd.Name)
	}
	crd, err := CRDForXRD(xrd)
	if err != nil {
		return nil, err
	}
	if _, err := ctrlenvtest.InstallCRDs(e.Config, ctrlenvtest.CRDInstallOptions{
		CRDs:         []*extv1.CustomResourceDefinition{crd},
		PollInterval: 50 * time.Millisecond,
		MaxTime:      30 * time.Second,
	}); err != nil {
		return nil, errors.Wrapf(err, "cannot install the CRD of XRD %s", xrd.Name)
	}
	got := &extv1.CustomResourceDefinition{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
		return nil, errors.Wrapf(err, "cannot get CRD %s", crd.Name)
	}
	return got, nil
}

func (e *Environment) installXRDWithCrossplane(ctx context.Context, xrd *xpextv2.CompositeResourceDefinition) (*extv1.CustomResourceDefinition, error) {
	gvk := schema.GroupVersionKind{Group: xrd.Spec.Group, Kind: xrd.Spec.Names.Kind}
	for _, v := range xrd.Spec.Versions {
		if v.Referenceable {
			gvk.Version = v.Name
		}
	}
	comp, err := Composition(gvk)
	if err != nil {
		return nil, err
	}
	if err := e.Client.Create(ctx, comp); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, errors.Wrapf(err, "cannot create Composition %s", comp.Name)
	}
	xrd.Spec.DefaultCompositionRef = &xpextv2.CompositionReference{Name: comp.Name}
	if err := e.Client.Create(ctx, xrd); err != nil {
		return nil, errors.Wrapf(err, "cannot create XRD %s", xrd.Name)
	}
	crd := &extv1.CustomResourceDefinition{}
	var seen string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &xpextv2.CompositeResourceDefinition{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(xrd), got); err != nil {
			return false, err
		}
		seen = fmt.Sprintf("%+v", got.Status.Conditions)
		if got.Status.GetCondition(xpextv1.TypeEstablished).Status != corev1.ConditionTrue {
			return false, nil
		}
		return true, e.Client.Get(ctx, client.ObjectKey{Name: xrd.Name}, crd)
	})
	if err != nil {
		return nil, errors.Wrapf(err, "Crossplane did not establish XRD %s (conditions %s; Crossplane: %v)", xrd.Name, seen, e.crossplane.Running())
	}
	return crd, nil
}

// InstallCRDFiles installs CRD manifests (provider CRDs read from their
// modules, for example) and waits until they are established.
func (e *Environment) InstallCRDFiles(paths ...string) error {
	if _, err := ctrlenvtest.InstallCRDs(e.Config, ctrlenvtest.CRDInstallOptions{
		Paths:              paths,
		ErrorIfPathMissing: true,
		PollInterval:       50 * time.Millisecond,
		MaxTime:            60 * time.Second,
	}); err != nil {
		return errors.Wrapf(err, "cannot install CRDs from %s", strings.Join(paths, ", "))
	}
	return nil
}

// CRDForXRD generates the CRD Crossplane would generate for an XRD.
// crossplane-runtime's xcrd works on the apiextensions v1 XRD type, which v2
// shares its wire form with.
func CRDForXRD(xrd *xpextv2.CompositeResourceDefinition) (*extv1.CustomResourceDefinition, error) {
	raw, err := json.Marshal(xrd)
	if err != nil {
		return nil, errors.Wrap(err, "cannot encode XRD")
	}
	v1 := &xpextv1.CompositeResourceDefinition{}
	if err := json.Unmarshal(raw, v1); err != nil {
		return nil, errors.Wrap(err, "cannot decode XRD as apiextensions.crossplane.io/v1")
	}
	v1.SetGroupVersionKind(xpextv1.CompositeResourceDefinitionGroupVersionKind)
	crd, err := xcrd.ForCompositeResource(v1)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot generate the CRD of XRD %s", xrd.Name)
	}
	return crd, nil
}

// NewNamespace creates a namespace with a unique name for one test.
func (e *Environment) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("%s-", prefix)}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", errors.Wrap(err, "cannot create namespace")
	}
	return ns.Name, nil
}

// SyncXRD regenerates an XRD's CRD from the XRD as it is now stored and
// updates it, as Crossplane's XRD controller does when an XRD changes (its
// labels, for example).
func (e *Environment) SyncXRD(ctx context.Context, name string) (*extv1.CustomResourceDefinition, error) {
	xrd := &xpextv2.CompositeResourceDefinition{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, xrd); err != nil {
		return nil, errors.Wrapf(err, "cannot get XRD %s", name)
	}
	want, err := CRDForXRD(xrd)
	if err != nil {
		return nil, err
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return nil, errors.Wrapf(err, "cannot get CRD %s", name)
	}
	crd.Labels = want.Labels
	crd.Spec = want.Spec
	if err := e.Client.Update(ctx, crd); err != nil {
		return nil, errors.Wrapf(err, "cannot update CRD %s", name)
	}
	return crd, nil
}

// Workload is a second API server standing in for a workload cluster.
type Workload = localkube.Workload

// StartWorkload starts an API server for a workload cluster.
func StartWorkload() (*Workload, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	// A workload API server that CAPI watched stops slowly on a loaded
	// machine: its watches drain first.
	o, err := linked(localkube.Options{Assets: assets, StopTimeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	return localkube.StartWorkload(o)
}

// linksDir holds the links of this test process.
var linksDir = sync.OnceValue(func() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("capxp-envtest-%d", os.Getpid()))
})

// linked starts etcd and kube-apiserver through links that tie them to the
// test process (dev/lifeline) when its TestMain called lifeline.Main:
// a test binary that panics or is killed then leaves neither running. The
// links live in one directory per test process.
func linked(o localkube.Options) (localkube.Options, error) {
	if !lifeline.Armed() {
		return o, nil
	}
	var err error
	if o.Etcd, err = lifeline.Wrap(linksDir(), filepath.Join(o.Assets, "etcd")); err != nil {
		return o, err
	}
	if o.APIServer, err = lifeline.Wrap(linksDir(), filepath.Join(o.Assets, "kube-apiserver")); err != nil {
		return o, err
	}
	return o, nil
}
