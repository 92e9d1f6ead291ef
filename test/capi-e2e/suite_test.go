//go:build e2e

// Package capie2e runs Cluster API's own end-to-end specs
// (sigs.k8s.io/cluster-api/test/e2e), unchanged, against CAPXP on the local
// plane: the plane is the management cluster, installed with clusterctl
// from the release as a platform team would, and its kwok Nodes are the
// workload cluster's. The suite is a module of its own so that Ginkgo, kind
// and the Docker client the framework imports stay out of the product's
// go.mod.
package capie2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// What every spec gets: the e2e configuration, clusterctl's configuration
// (the release's repository), the plane as the bootstrap cluster, and the
// folder the specs dump what they saw into.
var (
	ctx                   = context.Background()
	e2eConfig             *clusterctl.E2EConfig
	clusterctlConfigPath  string
	bootstrapClusterProxy framework.ClusterProxy
	artifactFolder        string
	p                     *plane.Plane
	skipCleanup           = flag.Bool("capxp.skip-cleanup", false, "leave each spec's cluster in place after the spec (the plane stops when the suite ends)")
	inPlaceUpdates        = flag.Bool("capxp.in-place-updates", false, "run CAPI's core and KubeadmControlPlane controllers as CAPI's binaries with their InPlaceUpdates feature, for the specs labelled in-place (-ginkgo.label-filter=in-place)")
)

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	os.Exit(m.Run())
}

// TestCAPIE2E starts the plane, installs CAPXP with clusterctl, and runs
// CAPI's specs.
func TestCAPIE2E(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)

	raw, err := os.ReadFile(filepath.Join("config", "capxp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e2eConfig = &clusterctl.E2EConfig{}
	if err := yaml.UnmarshalStrict(raw, e2eConfig); err != nil {
		t.Fatalf("config/capxp.yaml: %v", err)
	}

	// Kept when a spec fails: the plane's logs and the artifacts are the
	// only record of what happened.
	dir, err := os.MkdirTemp("", "capxp-capi-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if a := os.Getenv("ARTIFACTS"); a != "" {
		artifactFolder = a
	} else {
		artifactFolder = filepath.Join(dir, "artifacts")
	}
	if err := os.MkdirAll(artifactFolder, 0o750); err != nil {
		t.Fatal(err)
	}
	// The plane runs CAPI's controllers in this process: their logs go
	// with the artifacts, not between the specs' steps.
	logs, err := os.Create(filepath.Join(artifactFolder, "capi-controllers.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))

	setupCtx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	clusterctlRun, bin := ctlsetup.Install(setupCtx, t, dir)
	clusterctlConfigPath = ctlsetup.ConfigPath(dir)
	p, err = plane.Start(setupCtx, plane.Options{
		Dir: filepath.Join(dir, "plane"), ManagerBinary: bin, Clusterctl: true,
		Tools: tools.Dir(envtest.ToolsDir()),
		// CAPI's rollout specs check that Machines' taints reach their
		// Nodes, as CAPI's own e2e configuration enables it.
		CAPIFeatureGates: []string{"MachineTaintPropagation"},
		// The in-place specs run on a plane of their own, whose CAPI runs
		// as CAPI's binaries with its InPlaceUpdates feature (make
		// test-capi-e2e runs the suite twice).
		InPlaceUpdates: *inPlaceUpdates,
		Progress:       func(f string, a ...any) { t.Logf("plane: "+f, a...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Stop()
		if t.Failed() {
			t.Logf("the plane's logs are in %s; each spec's dump is in %s", p.Dir(), artifactFolder)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	ctlsetup.Init(setupCtx, t, p, clusterctlRun, bin)
	e2eConfig.Variables["WORKLOAD_ETCD_ENDPOINT"] = p.WorkloadEtcd()
	if err := addFlavors(dir, e2eConfig.Variables); err != nil {
		t.Fatal(err)
	}

	scheme := controllers.NewScheme()
	framework.TryAddDefaultSchemes(scheme)
	bootstrapClusterProxy = framework.NewClusterProxy("capxp-plane", p.Kubeconfig(), scheme,
		framework.WithMachineLogCollector(logCollector{}))
	if *inPlaceUpdates {
		// The RuntimeSDK spec's extension, on the plane whose CAPI can call it.
		if err := runTestExtension(setupCtx, bootstrapClusterProxy); err != nil {
			t.Fatal(err)
		}
	}

	secretsCtx, stopSecrets := context.WithCancel(t.Context())
	secretsDone := make(chan struct{})
	go func() {
		defer close(secretsDone)
		provideClusterSecrets(secretsCtx, bootstrapClusterProxy.GetClient())
	}()
	defer func() {
		stopSecrets()
		<-secretsDone
	}()

	ginkgo.RunSpecs(t, "CAPXP: Cluster API's e2e specs")
}

// provideClusterSecrets gives every Cluster the specs create, in whichever
// namespace, what the local backend's kubeadm flavors ask to find before
// they are applied (plane.KubeadmClusterSecrets: the workload cluster's
// kubeconfig, its etcd's CA and client certificate), as a platform's own
// automation would, until ctx ends. The specs name their clusters and
// namespaces themselves, and not every spec takes a hook to run when its
// namespace is created (KCPAdoptionSpec takes none).
//
// The etcd client certificate goes without the cluster-name label, as
// Cluster API's book has a user create an external etcd's: the label marks
// the Secrets of the cluster's own PKI (kubeadm's CAs and keys, which
// KubeadmControlPlane adopts and KCPAdoptionSpec counts: four, one of them
// the etcd CA), and CAPI's controllers read an unlabelled certificate
// directly rather than from their cache.
func provideClusterSecrets(ctx context.Context, c client.Client) {
	// made keeps a Cluster's Secrets from their first making: made again
	// after a partial failure, the etcd CA kept and the client certificate
	// created would not match.
	made := map[types.UID][]*corev1.Secret{}
	done := map[types.UID]bool{}
	log := ctrl.Log.WithName("cluster-secrets")
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		clusters := &clusterv1.ClusterList{}
		if err := c.List(ctx, clusters); err != nil {
			log.Error(err, "cannot list Clusters; trying again")
			return false, nil
		}
		for i := range clusters.Items {
			cl := &clusters.Items[i]
			if done[cl.UID] || !cl.DeletionTimestamp.IsZero() {
				continue
			}
			secrets, ok := made[cl.UID]
			if !ok {
				var err error
				if secrets, err = p.KubeadmClusterSecrets(cl.Namespace, cl.Name); err != nil {
					log.Error(err, "cannot make the Secrets of a Cluster; trying again", "cluster", client.ObjectKeyFromObject(cl))
					continue
				}
				for _, s := range secrets {
					if s.Name == cl.Name+"-apiserver-etcd-client" {
						delete(s.Labels, clusterv1.ClusterNameLabel)
					}
				}
				made[cl.UID] = secrets
			}
			created := true
			for _, s := range secrets {
				if err := c.Create(ctx, s.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
					log.Error(err, "cannot create a Secret of a Cluster; trying again", "secret", client.ObjectKeyFromObject(s))
					created = false
				}
			}
			done[cl.UID] = created
		}
		return false, nil
	})
}

// addFlavors adds the suite's flavors (data/) to the release's clusterctl
// repository in dir, and the e2e configuration's variables to clusterctl's
// configuration, as CAPI's own CreateRepository does for its suites.
func addFlavors(dir string, variables map[string]string) error {
	versions, err := filepath.Glob(filepath.Join(dir, "repository", release.Provider, "v*"))
	if err != nil || len(versions) != 1 {
		return fmt.Errorf("want one version of the crossplane provider in the repository, found %v (%v)", versions, err)
	}
	// The flavors, and the ClusterClass the in-place flavor names, made from
	// the release's: clusterctl takes a flavor's class from the repository.
	flavors, err := filepath.Glob(filepath.Join("data", "cluster-template-*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range flavors {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(versions[0], filepath.Base(f)), b, 0o600); err != nil {
			return err
		}
	}
	local, err := os.ReadFile(filepath.Join(versions[0], "clusterclass-crossplane-local.yaml"))
	if err != nil {
		return err
	}
	inPlace, err := inPlaceClass(local)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(versions[0], inPlaceClassFile), inPlace, 0o600); err != nil {
		return err
	}
	runtimeSDK, err := runtimeSDKClass(local)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(versions[0], runtimeSDKClassFile), runtimeSDK, 0o600); err != nil {
		return err
	}
	vars, err := yaml.Marshal(variables)
	if err != nil {
		return err
	}
	config, err := os.OpenFile(ctlsetup.ConfigPath(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := config.Write(vars); err != nil {
		_ = config.Close()
		return err
	}
	return config.Close()
}
