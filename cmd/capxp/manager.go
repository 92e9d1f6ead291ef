package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	capiflags "sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/caching"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/restmapper"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
)

type managerFlags struct {
	// diagnostics are CAPI's manager options: the diagnostics (metrics)
	// endpoint, served over TLS with Kubernetes authentication and
	// authorization unless --insecure-diagnostics, and the TLS settings of
	// it and the webhook server.
	diagnostics                capiflags.ManagerOptions
	healthAddr                 string
	profilerAddr               string
	leaderElect                bool
	leaderElectionID           string
	leaderElectionNamespace    string
	leaseDuration, renewDeadln time.Duration
	retryPeriod, syncPeriod    time.Duration
	namespace, watchFilter     string
	concurrency                int
	sharedCredentialsForAll    bool
	credentialsProviders       []string
	webhookPort                int
	webhookCertDir             string
	webhookURL                 string
	webhookService             string
	webhookServicePort         int
	webhookCABundleFile        string
	webhookCAInjectionFrom     string
	webhookCASecret            string
	inPlaceUpdates             bool
	qps                        float32
	burst                      int
}

func (f *managerFlags) add(fs *pflag.FlagSet) {
	capiflags.AddManagerOptions(fs, &f.diagnostics)
	fs.StringVar(&f.healthAddr, "health-addr", ":9440", "Address the health and readiness probes bind to.")
	fs.StringVar(&f.profilerAddr, "profiler-address", "",
		"Address to serve Go's pprof endpoints at, without authentication (for example 127.0.0.1:6060); off when empty. The diagnostics endpoint serves them authenticated unless --insecure-diagnostics.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles at a time.")
	fs.StringVar(&f.leaderElectionID, "leader-election-id", "capxp-manager.capxp.dev", "Name of the leader election lease.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election lease; the watched --namespace, or in a cluster the manager's own namespace, when empty.")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "Leader election lease duration.")
	fs.DurationVar(&f.renewDeadln, "leader-elect-renew-deadline", 10*time.Second, "Leader election renew deadline.")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "Leader election retry period.")
	fs.DurationVar(&f.syncPeriod, "sync-period", 10*time.Minute, "How often every watched object is reconciled again, as a safety net.")
	fs.StringVar(&f.namespace, "namespace", "", "Namespace to watch; all namespaces when empty.")
	fs.StringVar(&f.watchFilter, "watch-filter", "", "Only reconcile objects labelled cluster.x-k8s.io/watch-filter with this value.")
	fs.IntVar(&f.concurrency, "concurrency", 10, "Composite resources of one kind reconciled at once.")
	fs.BoolVar(&f.sharedCredentialsForAll, "shared-credentials-for-all-namespaces", false,
		"Let every namespace use every ClusterProviderConfig without a ClusterProviderConfigGrant. For single-tenant management clusters only.")
	fs.StringSliceVar(&f.credentialsProviders, "credentials-provider", nil,
		"A provider whose namespaced managed resources are admitted only with credentials their namespace owns or was granted: CONFIG_GROUP for a shipped backend's (aws.m.upbound.io, kubernetes.m.crossplane.io), or CONFIG_GROUP:MANAGED_GROUP:SECRET_FORMAT (format kubeconfig, aws or static). Repeatable; the shipped backends' when unset. See docs/tenancy.md.")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "Port the admission webhook server listens on.")
	fs.StringVar(&f.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory holding the webhook server's tls.crt and tls.key.")
	fs.StringVar(&f.webhookService, "webhook-service", "", "namespace/name of the Service in front of the webhook server, for the API server to call (in-cluster). Where Crossplane runs the manager as a provider package, the Service Crossplane gives its Provider, with Crossplane's certificate and CA, unless --webhook-url or this is given.")
	fs.IntVar(&f.webhookServicePort, "webhook-service-port", 443, "Port of --webhook-service that reaches the webhook server; 9443 (the Service Crossplane gives a provider package) where Crossplane runs the manager.")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "Base URL the API server calls the webhook server at, instead of a Service (out of cluster).")
	fs.StringVar(&f.webhookCABundleFile, "webhook-ca-bundle-file", "", "PEM CA bundle the API server trusts for the webhook; leave empty when a CA injector (cert-manager) fills it.")
	fs.StringVar(&f.webhookCAInjectionFrom, "webhook-ca-injection-from", "",
		"namespace/name of the cert-manager Certificate whose CA cert-manager's CA injector writes into the webhook configuration (annotation cert-manager.io/inject-ca-from).")
	fs.StringVar(&f.webhookCASecret, "webhook-ca-secret", "",
		"namespace/name of the Secret holding the webhook server's certificate, whose ca.crt CAPI's ExtensionConfig controller writes into the in-place update extension's registration (annotation runtime.cluster.x-k8s.io/inject-ca-from-secret).")
	fs.BoolVar(&f.inPlaceUpdates, "in-place-updates", true,
		"Serve CAPI's in-place update hooks on the webhook server and register them with an ExtensionConfig (needs --webhook-service or --webhook-url). CAPI calls them when its RuntimeSDK and InPlaceUpdates feature gates are on. CAPI supports one in-place update extension: turn this off where another one is registered. See docs/inplace.md.")
	fs.Float32Var(&f.qps, "kube-api-qps", 20, "Queries per second to the API server.")
	fs.IntVar(&f.burst, "kube-api-burst", 30, "Burst of queries to the API server.")
}

const managerUsage = `Usage: capxp manager [flags]

Runs the bridge controller manager: the XR reconcilers of every kind whose
XRD declares a CAPI contract, the credentials records of each namespace and
the admission webhook. Its Deployment (clusterctl) or
DeploymentRuntimeConfig (Crossplane packages) gives its flags.

Flags:
`

// runManager runs `capxp manager`; it returns the exit status once the
// manager stops.
func runManager(args []string, stdout, stderr io.Writer) int {
	c := command{name: "capxp manager", usage: managerUsage, stdout: stdout, stderr: stderr}
	f := &managerFlags{}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.add(fs)
	gfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gfs)
	fs.AddGoFlagSet(gfs)
	kubeconfig := fs.String("kubeconfig", "", "Path to a kubeconfig; $KUBECONFIG, ~/.kube/config or the in-cluster configuration when empty.")
	fs.Usage = func() {}
	switch err := fs.Parse(args); {
	case errors.Is(err, pflag.ErrHelp):
		c.usage += fs.FlagUsages()
		return c.help()
	case err != nil:
		return c.usageError("%v", err)
	case fs.NArg() > 0:
		return c.usageError("takes no argument, got %q", strings.Join(fs.Args(), " "))
	}
	ctrl.SetLogger(klog.Background())

	f.fromCrossplaneRuntime(os.Getenv, fs.Changed)
	wh, err := f.webhookClientConfig()
	if err != nil {
		return c.badInput(err)
	}
	var providers []credentials.Provider
	for _, p := range f.credentialsProviders {
		pr, err := credentials.ParseProvider(p)
		if err != nil {
			return c.badInput(errors.Wrap(err, "--credentials-provider"))
		}
		providers = append(providers, pr)
	}
	cfg, err := loadConfig(*kubeconfig)
	if err != nil {
		return c.badInput(err)
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	if err := start(cfg, f, providers, wh); err != nil {
		return c.outcome(err)
	}
	return exitOK
}

// start starts the manager, and returns when it stops.
func start(cfg *rest.Config, f *managerFlags, providers []credentials.Provider, wh *webhook.ClientConfig) error {
	tlsOptions, metrics, err := capiflags.GetManagerOptions(f.diagnostics)
	if err != nil {
		return inputError{errors.Wrap(err, "invalid diagnostics or TLS flags")}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           crwebhook.NewServer(crwebhook.Options{Port: f.webhookPort, CertDir: f.webhookCertDir, TLSOpts: tlsOptions}),
		Scheme:                  controllers.NewScheme(),
		Metrics:                 *metrics,
		HealthProbeBindAddress:  f.healthAddr,
		PprofBindAddress:        f.profilerAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        f.leaderElectionID,
		LeaseDuration:           &f.leaseDuration,
		RenewDeadline:           &f.renewDeadln,
		RetryPeriod:             &f.retryPeriod,
		LeaderElectionNamespace: f.leaderElectionNamespaceOrDefault(),
		// A replica stopped on purpose (a rolling update, a drain) hands
		// the lease over as it exits, which it does as soon as the
		// manager stops: the next leader need not wait for the lease to
		// expire.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         caching.Options(f.namespace, f.syncPeriod),
		NewCache:                      caching.New,
		MapperProvider:                restmapper.New,
		Client:                        caching.ClientOptions(),
	})
	if err != nil {
		return errors.Wrap(err, "cannot create manager")
	}
	if err := controllers.Setup(mgr, controllers.Options{
		Concurrency:                       f.concurrency,
		WatchFilter:                       f.watchFilter,
		SharedCredentialsForAllNamespaces: f.sharedCredentialsForAll,
		CredentialsProviders:              providers,
		Webhook:                           wh,
		InPlaceUpdates:                    f.inPlaceUpdates,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return errors.Wrap(err, "cannot add health check")
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return errors.Wrap(err, "cannot add readiness check")
	}
	return errors.Wrap(mgr.Start(ctrl.SetupSignalHandler()), "manager stopped")
}

// What Crossplane's provider runtime sets in a provider package's
// container: its namespace, its Provider's name (which names the Service
// Crossplane gives the package) and where it mounts the serving
// certificate Crossplane signs for that Service, with its CA beside it.
const (
	envPodNamespace       = "POD_NAMESPACE"
	envProviderName       = "PROVIDER_NAME"
	envTLSServerCertsDir  = "TLS_SERVER_CERTS_DIR"
	crossplaneWebhookPort = 9443
)

// fromCrossplaneRuntime serves the webhook server where Crossplane's
// provider runtime runs the manager (its environment names a Provider, a
// namespace and a certificate directory): on the Provider's Service, port
// 9443, with the certificate Crossplane mounted and its CA. A flag given
// keeps its value; a --webhook-url keeps the Service unused. Read from the
// environment rather than passed as flags, so that the runtime
// configuration of every release is the same and a bridge of any release
// runs with any release's configuration.
func (f *managerFlags) fromCrossplaneRuntime(getenv func(string) string, changed func(string) bool) {
	ns, provider, certs := getenv(envPodNamespace), getenv(envProviderName), getenv(envTLSServerCertsDir)
	if ns == "" || provider == "" || certs == "" {
		return
	}
	if !changed("webhook-service") && !changed("webhook-url") {
		f.webhookService = ns + "/" + provider
	}
	if !changed("webhook-service-port") {
		f.webhookServicePort = crossplaneWebhookPort
	}
	if !changed("webhook-cert-dir") {
		f.webhookCertDir = certs
	}
	if !changed("webhook-ca-bundle-file") && !changed("webhook-ca-injection-from") && !changed("webhook-ca-secret") {
		f.webhookCABundleFile = filepath.Join(certs, "ca.crt")
	}
}

// webhookClientConfig says how the API server reaches the credentials
// webhook; nil (no webhook) when neither a Service nor a URL is given.
func (f *managerFlags) webhookClientConfig() (*webhook.ClientConfig, error) {
	if f.webhookService == "" && f.webhookURL == "" {
		return nil, nil
	}
	if f.webhookServicePort < 1 || f.webhookServicePort > 65535 {
		return nil, errors.Errorf("--webhook-service-port must be a port number, not %d", f.webhookServicePort)
	}
	wh := &webhook.ClientConfig{URL: f.webhookURL, ServicePort: int32(f.webhookServicePort)}
	if f.webhookService != "" {
		ns, name, ok := strings.Cut(f.webhookService, "/")
		if !ok || ns == "" || name == "" {
			return nil, errors.Errorf("--webhook-service must be namespace/name, not %q", f.webhookService)
		}
		wh.ServiceNamespace, wh.ServiceName = ns, name
	}
	if f.webhookCAInjectionFrom != "" {
		if ns, name, ok := strings.Cut(f.webhookCAInjectionFrom, "/"); !ok || ns == "" || name == "" {
			return nil, errors.Errorf("--webhook-ca-injection-from must be namespace/name, not %q", f.webhookCAInjectionFrom)
		}
		wh.CAInjectionFrom = f.webhookCAInjectionFrom
	}
	if f.webhookCASecret != "" {
		if ns, name, ok := strings.Cut(f.webhookCASecret, "/"); !ok || ns == "" || name == "" {
			return nil, errors.Errorf("--webhook-ca-secret must be namespace/name, not %q", f.webhookCASecret)
		}
		wh.CASecret = f.webhookCASecret
	}
	if f.webhookCABundleFile != "" {
		ca, err := os.ReadFile(f.webhookCABundleFile)
		if err != nil {
			return nil, errors.Wrap(err, "cannot read --webhook-ca-bundle-file")
		}
		wh.CABundle = ca
	}
	return wh, nil
}

// leaderElectionNamespaceOrDefault is where the lease lives: the flag, else
// the watched namespace, else (empty) the manager's own namespace in a
// cluster.
func (f *managerFlags) leaderElectionNamespaceOrDefault() string {
	if f.leaderElectionNamespace != "" {
		return f.leaderElectionNamespace
	}
	return f.namespace
}
