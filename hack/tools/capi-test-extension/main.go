// Command capi-test-extension serves Cluster API's test extension
// (sigs.k8s.io/cluster-api/test/extension) for CAPI's
// ClusterUpgradeRuntimeSDKSpec on the local plane: its lifecycle hooks,
// which answer from a ConfigMap the spec writes and record every call, and
// its topology mutation hooks (GeneratePatches, ValidateTopology,
// DiscoverVariables), all CAPI's own handlers.
//
// Two things differ from CAPI's binary of the same handlers, and only
// these:
//   - GeneratePatches is given only the templates of the kinds CAPI's
//     handler decodes (kubeadm's bootstrap and control plane templates and
//     Docker's Dev templates). CAPI's handler fails on any other kind, and
//     a ClusterClass of CAPXP's has CrossplaneClusterTemplates and
//     CrossplaneMachineTemplates, which it has no patch for: they are left
//     as they are, as a handler that skips unknown kinds leaves them.
//   - The in-place update hooks are not served: CAPXP is the plane's update
//     extension, and CAPI takes one extension per in-place hook. The spec
//     turns them off in its ExtensionConfig's settings as well.
//
// It is built by hack/ensure-tools.sh capi-test-extension into the tools
// cache; nothing of it is in the project's module.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/test/extension/handlers/lifecycle"
	"sigs.k8s.io/cluster-api/test/extension/handlers/topologymutation"
	infrav1beta1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta1"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
)

func main() {
	var (
		port       = flag.Int("webhook-port", 9443, "the port the extension's handlers are served at (HTTPS)")
		certDir    = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "the folder that holds the serving certificate, tls.crt and tls.key")
		healthAddr = flag.String("health-addr", ":9440", "the address /readyz and /healthz are served at")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse() // and controller-runtime's --kubeconfig
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(ctrl.SetupSignalHandler(), *port, *certDir, *healthAddr); err != nil {
		fmt.Fprintln(os.Stderr, "capi-test-extension:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, port int, certDir, healthAddr string) error {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return err
	}
	srv, err := server.New(server.Options{Port: port, CertDir: certDir, Catalog: catalog})
	if err != nil {
		return fmt.Errorf("cannot create the extension's server: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// The lifecycle handlers read the spec's ConfigMaps as the spec writes
	// them, as CAPI's binary does.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		HealthProbeBindAddress: healthAddr,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		WebhookServer:          srv,
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}}}},
	})
	if err != nil {
		return fmt.Errorf("cannot create the extension's manager: %w", err)
	}
	// Asking the manager for its webhook server adds it to what the manager
	// starts.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}

	known, err := kubeadmAndDockerKinds()
	if err != nil {
		return err
	}
	mutation := topologymutation.NewExtensionHandlers()
	life := lifecycle.NewExtensionHandlers(mgr.GetClient())
	handlers := []server.ExtensionHandler{
		{Hook: runtimehooksv1.GeneratePatches, Name: "generate-patches", HandlerFunc: onlyKnownTemplates(known, mutation.GeneratePatches)},
		{Hook: runtimehooksv1.ValidateTopology, Name: "validate-topology", HandlerFunc: mutation.ValidateTopology},
		{Hook: runtimehooksv1.DiscoverVariables, Name: "discover-variables", HandlerFunc: mutation.DiscoverVariables},
		{Hook: runtimehooksv1.BeforeClusterCreate, Name: "before-cluster-create", HandlerFunc: life.DoBeforeClusterCreate},
		{Hook: runtimehooksv1.AfterControlPlaneInitialized, Name: "after-control-plane-initialized", HandlerFunc: life.DoAfterControlPlaneInitialized},
		{Hook: runtimehooksv1.BeforeClusterUpgrade, Name: "before-cluster-upgrade", HandlerFunc: life.DoBeforeClusterUpgrade},
		{Hook: runtimehooksv1.BeforeControlPlaneUpgrade, Name: "before-control-plane-upgrade", HandlerFunc: life.DoBeforeControlPlaneUpgrade},
		{Hook: runtimehooksv1.AfterControlPlaneUpgrade, Name: "after-control-plane-upgrade", HandlerFunc: life.DoAfterControlPlaneUpgrade},
		{Hook: runtimehooksv1.BeforeWorkersUpgrade, Name: "before-workers-upgrade", HandlerFunc: life.DoBeforeWorkersUpgrade},
		{Hook: runtimehooksv1.AfterWorkersUpgrade, Name: "after-workers-upgrade", HandlerFunc: life.DoAfterWorkersUpgrade},
		{Hook: runtimehooksv1.AfterClusterUpgrade, Name: "after-cluster-upgrade", HandlerFunc: life.DoAfterClusterUpgrade},
		{Hook: runtimehooksv1.BeforeClusterDelete, Name: "before-cluster-delete", HandlerFunc: life.DoBeforeClusterDelete},
	}
	for _, h := range handlers {
		if err := srv.AddExtensionHandler(h); err != nil {
			return fmt.Errorf("cannot serve %s: %w", h.Name, err)
		}
	}
	return mgr.Start(ctx)
}

// kubeadmAndDockerKinds is a scheme of the kinds CAPI's GeneratePatches
// handler decodes.
func kubeadmAndDockerKinds() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		infrav1beta1.AddToScheme, infrav1.AddToScheme,
		bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme,
		controlplanev1beta1.AddToScheme, controlplanev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// onlyKnownTemplates calls next with the request's templates of the kinds
// known holds, and answers for them; the others get no patch.
func onlyKnownTemplates(known *runtime.Scheme, next func(context.Context, *runtimehooksv1.GeneratePatchesRequest, *runtimehooksv1.GeneratePatchesResponse)) func(context.Context, *runtimehooksv1.GeneratePatchesRequest, *runtimehooksv1.GeneratePatchesResponse) {
	return func(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
		mine := *req
		mine.Items = nil
		for _, item := range req.Items {
			var tm metav1.TypeMeta
			if err := json.Unmarshal(item.Object.Raw, &tm); err != nil {
				resp.Status = runtimehooksv1.ResponseStatusFailure
				resp.Message = fmt.Sprintf("cannot read the kind of template %s: %v", item.UID, err)
				return
			}
			if known.Recognizes(tm.GroupVersionKind()) {
				mine.Items = append(mine.Items, item)
			}
		}
		next(ctx, &mine, resp)
	}
}
