package plane

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/function/asginstances"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// Modules whose versions in go.mod (embedded: capxp.RequiredVersion) name
// what the plane runs: CAPI's CRDs must match the CAPI controllers running
// in-process, and Crossplane core (binary and CRDs) the Crossplane API types
// and render protocol the project requires.
const (
	capiModule       = "sigs.k8s.io/cluster-api"
	crossplaneModule = "github.com/crossplane/crossplane/v2"
)

// CertManagerVersion is the cert-manager whose CRDs the plane installs: the
// one clusterctl v1.14 installs by default (hack/ensure-tools.sh stages it).
const CertManagerVersion = "v1.21.1"

// PrometheusOperatorVersion is the prometheus-operator whose ServiceMonitor
// CRD the shipped ServiceMonitor is applied with in test/install
// (hack/ensure-tools.sh stages it).
const PrometheusOperatorVersion = "v0.90.1"

// providerKubernetes is the package of the provider the local backend
// composes with.
const providerKubernetes = "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes"

// inputs are the paths of everything the plane reads from outside this
// binary.
type inputs struct {
	// assets holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	assets string
	// capiCRDs is CAPI's core CRD directory, kubeadmCRDs those of its
	// kubeadm bootstrap and control plane providers, clusterctlCRDs
	// clusterctl's inventory CRD, certManagerCRDs cert-manager's CRDs
	// (clusterctl installs providers' Certificates; nothing issues them but
	// the plane).
	capiCRDs, kubeadmCRDs, clusterctlCRDs, certManagerCRDs string
	// providerKubernetes is the provider's binary and
	// providerKubernetesCRDs its namespaced kinds' CRDs.
	providerKubernetes     string
	providerKubernetesCRDs []string
	// kwok runs the workload cluster's Nodes with the stages in kwokStages.
	kwok, kwokStages string
	// capiCore and capiKCP are CAPI's core and KubeadmControlPlane
	// controller manager binaries (Options.InPlaceUpdates), or capiCoreErr
	// and capiKCPErr why each is missing.
	capiCore, capiKCP       string
	capiCoreErr, capiKCPErr error
	// capiWebhooks is the folder of their webhook configurations (core.yaml,
	// kubeadm-control-plane.yaml), or capiWebhooksErr why it is missing.
	capiWebhooks    string
	capiWebhooksErr error
	// awsCRDs are the AWS kinds' CRDs (Options.AWSCRDs).
	awsCRDs []string
	// awsRuntimes are the AWS family's provider binaries by package name,
	// moto the AWS API emulator (Options.AWS).
	awsRuntimes map[string]string
	moto        string
	crossplane  crossplaneInputs
	// crossplaneCLI builds the dependencies' packages (package mode).
	crossplaneCLI string
}

// KwokVersion is the kwok hack/ensure-tools.sh builds.
const KwokVersion = "v0.8.0"

// KubectlVersion is the kubectl hack/ensure-tools.sh builds: the API
// server's version.
const KubectlVersion = "v1.36.5"

// CraneVersion is the crane (go-containerregistry's command line)
// hack/ensure-tools.sh builds: the module's own go-containerregistry.
const CraneVersion = "v0.21.8"

// CrossplaneCLIVersion is the crossplane CLI hack/ensure-tools.sh builds.
const CrossplaneCLIVersion = "v2.5.0"

// crossplaneInputs are what Crossplane core and the functions need.
type crossplaneInputs struct {
	version   string
	binary    string
	crds      string
	functions []function
}

// function is a composition function the Configuration depends on, with its
// binary and package directory; or CAPXP's own, served in-process with its
// package metadata in meta.
type function struct {
	packages.Dependency
	binary    string
	pkgMeta   string
	meta      []byte
	inProcess func() fnv1.FunctionRunnerServiceServer
}

// resolveInputs finds every input in a tools directory and reports all that
// are missing in one error.
func resolveInputs(d tools.Dir) (inputs, error) {
	var in inputs
	var errs []error
	var err error
	if in.assets, err = d.Assets(); err != nil {
		errs = append(errs, err)
	}
	capi, err := capxp.RequiredVersion(capiModule)
	if err != nil {
		errs = append(errs, err)
	} else {
		if in.capiCRDs, err = d.CRDs("cluster-api", capi); err != nil {
			errs = append(errs, err)
		}
		if in.kubeadmCRDs, err = d.CRDs("cluster-api-kubeadm", capi); err != nil {
			errs = append(errs, err)
		}
		if in.clusterctlCRDs, err = d.CRDs("clusterctl", capi); err != nil {
			errs = append(errs, err)
		}
		in.capiCore, in.capiCoreErr = d.Binary("capi-core", capi)
		in.capiKCP, in.capiKCPErr = d.Binary("capi-kcp", capi)
		in.capiWebhooks, in.capiWebhooksErr = d.CRDs("cluster-api-webhooks", capi)
	}
	if in.certManagerCRDs, err = d.CRDs("cert-manager", CertManagerVersion); err != nil {
		errs = append(errs, err)
	}
	pk, err := packages.Find(providerKubernetes)
	if err != nil {
		errs = append(errs, err)
	} else {
		if in.providerKubernetes, err = d.Binary(pk.Name(), pk.Version); err != nil {
			errs = append(errs, err)
		}
		pkg, err := d.Package(pk.Name(), pk.Version)
		if err != nil {
			errs = append(errs, err)
		} else {
			// The namespaced kinds only: the legacy cluster-scoped ones
			// convert through the provider's webhook, which nothing here
			// serves.
			in.providerKubernetesCRDs, err = filepath.Glob(filepath.Join(pkg, "crds", "kubernetes.m.crossplane.io_*.yaml"))
			if err == nil && len(in.providerKubernetesCRDs) == 0 {
				err = errors.Errorf("%s has no CRDs of the kubernetes.m.crossplane.io kinds: stage it again with hack/ensure-tools.sh %s", pkg, pk.Name())
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if in.kwok, err = d.Binary("kwok", KwokVersion); err != nil {
		errs = append(errs, err)
	}
	if in.kwokStages, err = d.Stages(KwokVersion); err != nil {
		errs = append(errs, err)
	}
	var xerrs []error
	in.crossplane, xerrs = resolveCrossplane(d)
	return in, tools.Missing(append(errs, xerrs...)...)
}

// resolveCrossplane finds what Crossplane core and the Configuration's
// functions need in a tools directory, or says what is missing.
func resolveCrossplane(d tools.Dir) (crossplaneInputs, []error) {
	var in crossplaneInputs
	var errs []error
	var err error
	if in.version, err = capxp.RequiredVersion(crossplaneModule); err != nil {
		errs = append(errs, err)
	} else {
		if in.binary, err = d.Binary("crossplane", in.version); err != nil {
			errs = append(errs, err)
		}
		if in.crds, err = d.CRDs("crossplane", in.version); err != nil {
			errs = append(errs, err)
		}
	}
	fns, err := packages.Dependencies("Function")
	if err != nil {
		errs = append(errs, err)
	}
	for _, dep := range fns {
		f := function{Dependency: dep}
		if f.binary, err = d.Binary(dep.Name(), dep.Version); err != nil {
			errs = append(errs, err)
		}
		pkg, err := d.Package(dep.Name(), dep.Version)
		if err != nil {
			errs = append(errs, err)
		}
		f.pkgMeta = filepath.Join(pkg, "crossplane.yaml")
		in.functions = append(in.functions, f)
	}
	// CAPXP's own function, which the release adds to the Configuration's
	// dependencies.
	own := function{
		Dependency: packages.Dependency{Package: release.Options{}.FunctionPackage(), Kind: "Function", Version: capxp.Version()},
		inProcess:  func() fnv1.FunctionRunnerServiceServer { return asginstances.NewFunction(logging.NewNopLogger()) },
	}
	if own.meta, err = release.FunctionMeta(); err != nil {
		errs = append(errs, err)
	}
	in.functions = append(in.functions, own)
	return in, errs
}

// ownCRDs are CAPXP's template CRDs and ClusterProviderConfigGrant, embedded.
func ownCRDs() ([]*extv1.CustomResourceDefinition, error) {
	return decodeCRDs(capxp.Manifests, capxp.CRDsDir)
}

// readCRDs reads the CRDs of a directory, one per YAML file.
func readCRDs(dir string) ([]*extv1.CustomResourceDefinition, error) {
	return decodeCRDs(os.DirFS(dir), ".")
}

// decodeCRDs decodes the CRD of every YAML file in a directory of fsys.
func decodeCRDs(fsys fs.FS, dir string) ([]*extv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list the CRDs of %s", dir)
	}
	sort.Strings(files)
	out := make([]*extv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read %s", f)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, errors.Wrapf(err, "cannot decode %s", f)
		}
		out = append(out, crd)
	}
	return out, nil
}

// awsCRDs finds, in the AWS family's staged package, the CRD of every kind
// CAPXP's aws Compositions compose and those of the family's namespaced
// ProviderConfigs, at the version the Configuration pins.
func awsCRDs(d tools.Dir) ([]string, error) {
	dep, err := packages.Find(awsFamilyRegistry + "/provider-aws-ec2")
	if err != nil {
		return nil, err
	}
	staged, err := d.PackageFile("provider-aws", dep.Version, "crossplane.yaml.tmpl")
	if err != nil {
		return nil, err
	}
	kinds, err := compositions.ComposedKinds("aws")
	if err != nil {
		return nil, err
	}
	names := []string{"aws.m.upbound.io_providerconfigs", "aws.m.upbound.io_clusterproviderconfigs", "aws.m.upbound.io_providerconfigusages"}
	for _, k := range kinds {
		names = append(names, k.Group+"_"+compositions.Plural(k.Kind))
	}
	files := make([]string, 0, len(names))
	for _, n := range names {
		f := filepath.Join(staged, "crds", n+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, errors.Errorf("%s holds no CRD %s: stage it again with hack/ensure-tools.sh provider-aws", staged, n)
		}
		files = append(files, f)
	}
	return files, nil
}
