package plane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
)

// KubeletNamespace is the namespace whose Deployment a bare plane runs:
// where `clusterctl init --infrastructure crossplane` installs the manager.
const KubeletNamespace = "capxp-system"

// serveBare makes a bare plane (Options.Bare) ready for a user to install
// CAPXP on: Crossplane pointed at the registry, the package runtime running
// what Crossplane installs, clusterctl's configuration of the CAPI
// providers the plane runs written, and a kubelet for capxp-system.
func (p *Plane) serveBare(ctx context.Context) error {
	if err := p.mirrorRegistries(ctx); err != nil {
		return err
	}
	p.startPackageRuntime()
	if err := p.writeClusterctlConfig(); err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.stopKubelet, p.kubeletDone = cancel, make(chan struct{})
	go func() {
		defer close(p.kubeletDone)
		p.ServeDeployments(kctx, KubeletNamespace)
	}()
	return nil
}

// ClusterctlConfig is the clusterctl configuration file a bare plane writes:
// the CAPI providers it runs in its own process (core, and kubeadm's
// bootstrap and control plane), each with a local repository holding the
// metadata clusterctl reads to check a new provider's contract and to plan
// upgrades, and cert-manager as externally provisioned (the plane stands in
// for it). A user adds their own provider's entry to its providers.
func (p *Plane) ClusterctlConfig() string { return filepath.Join(p.dir, "clusterctl.yaml") }

func (p *Plane) writeClusterctlConfig() error {
	providers, err := CAPIProviders(filepath.Join(p.dir, "clusterctl-repository"))
	if err != nil {
		return err
	}
	config := "# The local plane stands in for cert-manager.\ncert-manager:\n  externallyProvisioned: \"true\"\n" +
		"# The CAPI providers the local plane runs in its own process: clusterctl reads\n" +
		"# their metadata. Add your provider's entry at the end.\nproviders:\n" + providers
	return errors.Wrap(os.WriteFile(p.ClusterctlConfig(), []byte(config), 0o600), "cannot write clusterctl's configuration")
}

// CAPIProviders writes, in repo, a clusterctl repository of each CAPI
// provider the plane runs in its own process (core, and kubeadm's bootstrap
// and control plane providers, at go.mod's CAPI version): their metadata,
// which clusterctl reads to check a new provider's contract against CAPI's
// and to plan upgrades, and no components (nothing is installed from it).
// It returns their entries of clusterctl's providers list.
func CAPIProviders(repo string) (string, error) {
	version, err := capxp.RequiredVersion(capiModule)
	if err != nil {
		return "", err
	}
	metadata, err := capiMetadata(version)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, pr := range []struct{ name, typ, folder, file string }{
		{"cluster-api", "CoreProvider", "cluster-api", "core-components.yaml"},
		{"kubeadm", "BootstrapProvider", "bootstrap-kubeadm", "bootstrap-components.yaml"},
		{"kubeadm", "ControlPlaneProvider", "control-plane-kubeadm", "control-plane-components.yaml"},
	} {
		d := filepath.Join(repo, pr.folder, version)
		if err := os.MkdirAll(d, 0o750); err != nil {
			return "", errors.Wrap(err, "cannot create clusterctl's local repository")
		}
		if err := os.WriteFile(filepath.Join(d, "metadata.yaml"), metadata, 0o600); err != nil {
			return "", errors.Wrap(err, "cannot write a CAPI provider's metadata")
		}
		if err := os.WriteFile(filepath.Join(d, pr.file), []byte("# CAPI runs in the plane's process; clusterctl reads only its metadata.\n"), 0o600); err != nil {
			return "", errors.Wrap(err, "cannot write a CAPI provider's components")
		}
		fmt.Fprintf(&b, "- name: %s\n  type: %s\n  url: file://%s\n", pr.name, pr.typ, filepath.Join(d, pr.file))
	}
	return b.String(), nil
}

// capiMetadata is clusterctl's metadata of a CAPI release: its minor
// release series and the contract it serves.
func capiMetadata(version string) ([]byte, error) {
	mm := strings.TrimPrefix(semver.MajorMinor(version), "v")
	major, minor, ok := strings.Cut(mm, ".")
	if !ok {
		return nil, errors.Errorf("CAPI's version %q is not a semantic version", version)
	}
	return fmt.Appendf(nil, `apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
- major: %s
  minor: %s
  contract: v1beta2
`, major, minor), nil
}

// ServeDeployments does what a node's kubelet does for the Deployments of
// a namespace until ctx ends: it runs a Deployment's pod (RunDeployment,
// the image pulled from the plane's registry) once it exists, runs it again
// when its template changes (a rollout), and leaves stopping it to
// RunDeployment (deleted, or scaled to zero). One Deployment at a time:
// the plane runs one manager pod. A pod that cannot run is said once per
// template and tried again after a while, as a kubelet backs off.
func (p *Plane) ServeDeployments(ctx context.Context, namespace string) {
	var (
		running    string // namespace/name@generation of the pod running
		failed     string
		failedTime time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		dl := &appsv1.DeploymentList{}
		if err := p.client.List(ctx, dl, client.InNamespace(namespace)); err != nil {
			continue
		}
		if len(dl.Items) == 0 {
			running = ""
			continue
		}
		d := &dl.Items[0]
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			running = ""
			continue
		}
		want := fmt.Sprintf("%s/%s@%d", d.Namespace, d.Name, d.Generation)
		if want == running && p.manager != nil {
			if done, _ := p.manager.exited(); !done {
				continue
			}
		}
		if want == failed && time.Since(failedTime) < 30*time.Second {
			continue
		}
		p.StopDeployment()
		if err := p.RunDeployment(ctx, d.Namespace, d.Name, ""); err != nil {
			if failed != want {
				p.progress("cannot run Deployment %s/%s (tried again every 30s): %v", d.Namespace, d.Name, err)
			}
			failed, failedTime, running = want, time.Now(), ""
			continue
		}
		p.progress("running Deployment %s/%s (generation %d) as its pod would run", d.Namespace, d.Name, d.Generation)
		running, failed = want, ""
	}
}
