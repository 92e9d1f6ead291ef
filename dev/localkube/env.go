// Package localkube starts real Kubernetes API servers on loopback — etcd
// and kube-apiserver through controller-runtime's envtest — for the local
// management plane and the tests, and runs CAPI's core controllers
// in-process against them. It finds nothing by itself: the caller names the
// binaries and the CRDs to install.
package localkube

import (
	"os"
	"time"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Options configure an API server.
type Options struct {
	// Assets is the directory holding the etcd and kube-apiserver binaries.
	// $KUBEBUILDER_ASSETS overrides it, as in every envtest.
	Assets string
	// Etcd and APIServer, when set, are the binaries to run instead of
	// those in Assets (links that tie them to this process, for example).
	Etcd, APIServer string
	// Scheme knows the types the client reads; client-go's when nil.
	Scheme *runtime.Scheme
	// CRDPaths are CRD files or directories to install, CRDs CRD objects.
	CRDPaths []string
	CRDs     []*extv1.CustomResourceDefinition
	// Webhooks makes envtest create serving certificates for a webhook
	// server run in this process (see Environment.Envtest).
	Webhooks bool
	// StopTimeout bounds how long stopping each process may take; envtest's
	// default when zero. An API server that controllers watched stops
	// slowly on a loaded machine: its watches drain first.
	StopTimeout time.Duration
	// AuditLog, when set, is where the API server logs every write it
	// serves, with its request (Kubernetes' audit log, JSON lines): what a
	// user reads to see who wrote what.
	AuditLog string
	// APIServerFlags are kube-apiserver flags to set, by name without the
	// dashes (for example runtime-config).
	APIServerFlags map[string]string
}

// auditPolicy logs writes with their requests, and nothing else; writes of
// provider-kubernetes' managed resources with what was stored too, so a
// test can tell which credentials each one named after defaults applied.
// Crossplane's package manager rewrites every managed resource definition
// of the installed providers again and again (four fifths of the log with
// the AWS provider's); no reader needs them.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create, update, patch]
  resources: [{group: kubernetes.m.crossplane.io}, {group: kubernetes.crossplane.io}]
- level: None
  resources: [{group: apiextensions.crossplane.io, resources: [managedresourcedefinitions, managedresourcedefinitions/status]}]
- level: Request
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// Environment is a running kube-apiserver and etcd.
type Environment struct {
	// Envtest is the controller-runtime environment behind it, for its
	// webhook serving options and users.
	Envtest *ctrlenvtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Scheme is the client's scheme.
	Scheme *runtime.Scheme
	// Client is an uncached client on Config.
	Client client.Client

	// certDir holds kube-apiserver's certificates. It is the
	// Environment's, not envtest's, so that a restarted API server serves
	// the same certificates to the same users.
	certDir string
}

// Start starts etcd and kube-apiserver, installs the CRDs and waits until
// they are served.
func Start(o Options) (*Environment, error) {
	scheme := o.Scheme
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	env := &ctrlenvtest.Environment{
		BinaryAssetsDirectory:   o.Assets,
		Scheme:                  scheme,
		CRDInstallOptions:       ctrlenvtest.CRDInstallOptions{Paths: o.CRDPaths, CRDs: o.CRDs, ErrorIfPathMissing: true},
		ControlPlaneStopTimeout: o.StopTimeout,
	}
	if o.Webhooks {
		// Serving certificates for a webhook server in this process; its
		// owner registers the webhook configuration itself.
		env.WebhookInstallOptions = ctrlenvtest.WebhookInstallOptions{}
	}
	if o.APIServer != "" {
		env.ControlPlane.GetAPIServer().Path = o.APIServer
	}
	if o.Etcd != "" {
		env.ControlPlane.Etcd = &ctrlenvtest.Etcd{Path: o.Etcd}
	}
	certDir, err := os.MkdirTemp("", "kube-apiserver-")
	if err != nil {
		return nil, errors.Wrap(err, "cannot create kube-apiserver's certificate directory")
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	if o.AuditLog != "" {
		policy := o.AuditLog + ".policy.yaml"
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, errors.Wrap(err, "cannot write the audit policy")
		}
		env.ControlPlane.GetAPIServer().Configure().
			Set("audit-log-path", o.AuditLog).
			Set("audit-policy-file", policy)
	}
	for k, v := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	e := &Environment{Envtest: env, Scheme: scheme, certDir: certDir}
	if e.Config, err = env.Start(); err != nil {
		_ = os.RemoveAll(certDir)
		return nil, errors.Wrap(err, "cannot start kube-apiserver and etcd")
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		_ = e.Stop()
		return nil, errors.Wrap(err, "cannot create client")
	}
	return e, nil
}

// Stop stops the API server and etcd.
func (e *Environment) Stop() error {
	err := e.Envtest.Stop()
	return errors.Join(err, os.RemoveAll(e.certDir))
}

// StopAPIServer stops kube-apiserver and leaves etcd running, as a crash or
// an upgrade of the API server would: clients see connections refused.
func (e *Environment) StopAPIServer() error {
	return errors.Wrap(e.Envtest.ControlPlane.GetAPIServer().Stop(), "cannot stop kube-apiserver")
}

// StartAPIServer starts a stopped kube-apiserver again on the same address
// and etcd, with the same certificates and flags, so every client's
// configuration still holds, and waits until it is healthy.
func (e *Environment) StartAPIServer() error {
	return errors.Wrap(e.Envtest.ControlPlane.GetAPIServer().Start(), "cannot start kube-apiserver again")
}

// AdminKubeconfig is a kubeconfig for a new member of system:masters, for
// components run as processes.
func (e *Environment) AdminKubeconfig(name string) ([]byte, error) {
	u, err := e.Envtest.AddUser(ctrlenvtest.User{Name: name, Groups: []string{"system:masters"}}, e.Config)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot add user %s", name)
	}
	return u.KubeConfig()
}

// User returns a configuration authenticating as a user with no permissions
// but those RBAC gives it.
func (e *Environment) User(name string) (*rest.Config, error) {
	u, err := e.Envtest.AddUser(ctrlenvtest.User{Name: name}, e.Config)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot add user %s", name)
	}
	return u.Config(), nil
}

// Workload is a second API server standing in for a workload cluster.
type Workload struct {
	*Environment
	// Kubeconfig reaches it as an administrator, for CAPI's
	// <cluster>-kubeconfig secret.
	Kubeconfig []byte
}

// StartWorkload starts an API server for a workload cluster; o's CRDs and
// webhooks are usually empty.
func StartWorkload(o Options) (*Workload, error) {
	e, err := Start(o)
	if err != nil {
		return nil, errors.Wrap(err, "cannot start the workload cluster's API server")
	}
	kc, err := Kubeconfig(e.Config, "workload")
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Workload{Environment: e, Kubeconfig: kc}, nil
}

// Kubeconfig writes a rest.Config as a kubeconfig file's contents, for
// processes that read one: certificates, keys and tokens inline or by file,
// as the configuration has them.
func Kubeconfig(cfg *rest.Config, name string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
		TLSServerName:            cfg.ServerName,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	return raw, errors.Wrap(err, "cannot write a kubeconfig")
}
