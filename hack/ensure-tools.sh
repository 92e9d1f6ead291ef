#!/usr/bin/env bash
# Builds the real components the tests run (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, crane, controller-gen, golangci-lint, crossplane, kwok, the
# composition functions, CAPI's core controller manager, and the clients clusterctl and the crossplane CLI) from the Go module proxy into a
# git-ignored cache keyed by tool and version, and skips what already exists.
# Nothing here downloads a release binary: each tool has its own module under
# hack/tools with a committed go.mod and go.sum, so the project's module never
# pulls in Kubernetes or etcd.
#
# It also stages what the local management plane (capxp-dev) reads from other
# projects' modules, so that it needs neither a checkout nor the Go toolchain:
#   crds/cluster-api-<v>/      CAPI's core CRDs (the version go.mod requires)
#   crds/cluster-api-kubeadm-<v>/  the kubeadm bootstrap and control plane CRDs
#   crds/crossplane-<v>/       Crossplane's CRDs (tool "crds", and with "crossplane")
#   <function>-<v>/package/    a function's crossplane.yaml (with its binary)
#   provider-kubernetes-<v>/package/  its crossplane.yaml and crds/
#
# Usage: hack/ensure-tools.sh [tool...]   (default: all; "crds" is a tool)
# Prints the path of every binary or staged directory, one "name=path" per line.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CAPXP_TOOLS_CACHE:-$root/.cache/tools}

etcd_version=v3.6.16
kube_version=v1.36.5
# crane, go-containerregistry's command line (docs push the manager image
# with it): the version of the module's own go-containerregistry.
crane_version=v0.21.8
controller_gen_version=v0.21.0
crossplane_version=v2.4.0
pat_version=v0.10.9
auto_ready_version=v0.7.0
provider_kubernetes_version=v1.2.1
# The AWS family the aws Composition composes with: their packages' CRDs and
# metadata template are staged for the plane's registry.
provider_aws_version=v2.7.0
provider_aws_services=(ec2 elbv2 secretsmanager eks iam autoscaling)
# The family's runtimes (make test-aws) are v2.5.0, the newest v2 release
# whose dependencies the module proxy serves (hack/tools/provider-aws); its
# CRDs of these services serve and store the same versions as v2.7.0's.
provider_aws_runtime_version=v2.5.0
# The services make test-aws runs (the machines, the pools and the cluster's network).
provider_aws_runtime_services=(ec2 elbv2 secretsmanager autoscaling)
golangci_lint_version=v2.15.0
clusterctl_version=v1.14.2
crossplane_cli_version=v2.5.0
# The cert-manager clusterctl v1.14.2 installs by default; only its CRDs are
# staged (clusterctl is told it is externally provisioned).
cert_manager_version=v1.21.1
# The prometheus-operator whose ServiceMonitor and PrometheusRule CRDs the
# shipped monitoring objects are checked against (only the CRDs are staged).
prometheus_operator_version=v0.90.1
# kwok runs the workload cluster's Nodes: heartbeats, Ready, pods.
kwok_version=v0.8.0
# Prometheus and promtool check the shipped alerts and scrape the bridge:
# Debian's package, pinned (building Prometheus from its module would pull
# in every service discovery's SDK).
prometheus_deb_version=2.42.0+ds-5+b6
prometheus_version=v2.42.0

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS [SOURCE...]]: builds again
# when the module's go.mod or go.sum changed since the cached binary was
# built (a dependency bumped for a security fix reaches the binary), or one
# of the SOURCE files (relative to MODULE_DIR: a command of the project's
# own), as recorded in NAME.modsum beside it.
build() {
  local name=$1 version=$2 moddir=$3 pkg=$4 ldflags=${5:-}
  local sources=("${@:6}")
  local out=$cache/$name-$version/$name
  local modsum
  modsum=$(cat "$root/$moddir/go.mod" "$root/$moddir/go.sum" "${sources[@]/#/$root/$moddir/}" | sha256sum | cut -d' ' -f1)
  if [[ ! -x $out ]] || [[ $(cat "$out.modsum" 2>/dev/null) != "$modsum" ]]; then
    echo "building $name $version (cold builds take minutes; later runs reuse $out)" >&2
    local start=$SECONDS
    mkdir -p "$(dirname "$out")"
    (cd "$root/$moddir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "$modsum" > "$out.modsum"
    echo "built $name in $((SECONDS - start))s" >&2
  fi
  echo "$name=$out"
}

# deb NAME VERSION PACKAGE DEB_VERSION FILE...: the files (usr/bin/...) of a
# Debian package, extracted without installing it into NAME-VERSION/.
deb() {
  local name=$1 version=$2 pkg=$3 debv=$4; shift 4
  local out=$cache/$name-$version
  if [[ ! -x $out/$(basename "$1") ]]; then
    echo "fetching Debian's $pkg $debv" >&2
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && { apt-get download -q "$pkg=$debv" 2>/dev/null || { apt-get update -qq && apt-get download -q "$pkg=$debv"; }; } >&2 &&
      dpkg-deb -x ./*.deb root)
    mkdir -p "$out.tmp"
    for f in "$@"; do cp "$tmp/root/$f" "$out.tmp/"; done
    rm -rf "$tmp" "$out"
    mv "$out.tmp" "$out"
  fi
  for f in "$@"; do echo "$(basename "$f")=$out/$(basename "$f")"; done
}

# module_dir MODULE_DIR MODULE: the directory of a module (its replacement,
# if any) as the module at MODULE_DIR requires it, downloaded if need be.
module_dir() {
  local moddir=$1 module=$2
  (cd "$root/$moddir" && GOFLAGS=-mod=mod go mod download "$module" &&
    GOFLAGS=-mod=mod go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' "$module")
}

# stage OUT SRC...: copies directories or files into OUT, replacing it
# atomically (module cache files are read-only; the copies are not).
stage() {
  local out=$1; shift
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  cp -R "$@" "$out.tmp/"
  chmod -R u+w "$out.tmp"
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

# stage_package NAME VERSION MODULE_DIR MODULE: a function's or provider's
# package/ directory (crossplane.yaml, and crds/ for a provider) beside its
# binary.
stage_package() {
  local name=$1 version=$2 moddir=$3 module=$4
  local out=$cache/$name-$version/package
  if [[ ! -f $out/crossplane.yaml ]]; then
    local dir
    dir=$(module_dir "$moddir" "$module")
    stage "$out" "$dir"/package/*
    echo "staged $name $version's package in $out" >&2
  fi
  echo "$name-package=$out"
}

# stage_crds NAME VERSION MODULE_DIR MODULE SUBDIR: a module's CRD directory.
stage_crds() {
  local name=$1 version=$2 moddir=$3 module=$4 subdir=$5
  local out=$cache/crds/$name-$version
  if [[ ! -d $out ]] || [[ -z $(ls -A "$out") ]]; then
    local dir
    dir=$(module_dir "$moddir" "$module")
    stage "$out" "$dir/$subdir"/*.yaml
    echo "staged $name $version's CRDs in $out" >&2
  fi
  echo "crds/$name=$out"
}

# CAPI's CRDs at the version the project's go.mod requires: the plane runs
# CAPI's controllers from that module.
stage_capi_crds() {
  local version
  version=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  stage_crds cluster-api "$version" . sigs.k8s.io/cluster-api core/config/crd/bases
}

# The kubeadm bootstrap and control plane providers' CRDs, from the same CAPI
# module: the plane runs their controllers for ClusterClass clusters.
stage_kubeadm_crds() {
  local version out dir
  version=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  out=$cache/crds/cluster-api-kubeadm-$version
  if [[ ! -d $out ]] || [[ -z $(ls -A "$out") ]]; then
    dir=$(module_dir . sigs.k8s.io/cluster-api)
    stage "$out" "$dir"/bootstrap/kubeadm/config/crd/bases/*.yaml "$dir"/controlplane/kubeadm/config/crd/bases/*.yaml
    echo "staged cluster-api $version's kubeadm CRDs in $out" >&2
  fi
  echo "crds/cluster-api-kubeadm=$out"
}

# CAPI's core and KubeadmControlPlane's webhook configurations, from the
# same module: the plane that runs their binaries registers them, pointed at
# each process's webhook server.
stage_capi_webhooks() {
  local version out dir
  version=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  out=$cache/crds/cluster-api-webhooks-$version
  if [[ ! -f $out/core.yaml ]] || [[ ! -f $out/kubeadm-control-plane.yaml ]]; then
    dir=$(module_dir . sigs.k8s.io/cluster-api)
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    cp "$dir/core/config/webhook/manifests.yaml" "$out.tmp/core.yaml"
    cp "$dir/controlplane/kubeadm/config/webhook/manifests.yaml" "$out.tmp/kubeadm-control-plane.yaml"
    chmod -R u+w "$out.tmp"
    rm -rf "$out"
    mv "$out.tmp" "$out"
    echo "staged cluster-api $version's webhook configurations in $out" >&2
  fi
  echo "crds/cluster-api-webhooks=$out"
}

# cert-manager's CRDs, from its module (deploy/crds holds plain manifests).
stage_cert_manager_crds() {
  local out=$cache/crds/cert-manager-$cert_manager_version
  if [[ ! -d $out ]] || [[ -z $(ls -A "$out") ]]; then
    local dir
    dir=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$cert_manager_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    stage "$out" "$dir"/deploy/crds/*.yaml
    echo "staged cert-manager $cert_manager_version's CRDs in $out" >&2
  fi
  echo "crds/cert-manager=$out"
}

# prometheus-operator's ServiceMonitor and PrometheusRule CRDs, from its
# module (example/prometheus-operator-crd holds plain manifests).
stage_prometheus_operator_crds() {
  local out=$cache/crds/prometheus-operator-$prometheus_operator_version
  if [[ ! -d $out ]] || [[ -z $(ls -A "$out") ]]; then
    local dir
    dir=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$prometheus_operator_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    stage "$out" "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml
    echo "staged prometheus-operator $prometheus_operator_version's CRDs in $out" >&2
  fi
  echo "crds/prometheus-operator=$out"
}

# clusterctl's inventory CRD: the plane records the CAPI it runs in it, as
# clusterctl would have.
stage_clusterctl_crds() {
  local version
  version=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  stage_crds clusterctl "$version" . sigs.k8s.io/cluster-api cmd/clusterctl/config/manifest
}

# stage_provider_aws: the AWS family's package metadata template and the CRDs
# of the family's config package (aws) and of each service the Configuration
# depends on, from the provider-aws module. The local plane builds the family
# packages from them, as the family's build does, to serve them from its
# registry.
stage_provider_aws() {
  local out=$cache/provider-aws-$provider_aws_version/package
  if [[ ! -f $out/crossplane.yaml.tmpl || "$(cat "$out/services" 2>/dev/null)" != "${provider_aws_services[*]}" ]]; then
    local dir files=()
    dir=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "github.com/upbound/provider-aws/v2@$provider_aws_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    for g in aws "${provider_aws_services[@]/%/.aws}"; do
      files+=("$dir"/package/crds/"$g".upbound.io_*.yaml "$dir"/package/crds/"$g".m.upbound.io_*.yaml)
    done
    rm -rf "$out.tmp" && mkdir -p "$out.tmp/crds"
    cp "$dir"/package/crossplane.yaml.tmpl "$out.tmp/"
    cp "${files[@]}" "$out.tmp/crds/"
    echo "${provider_aws_services[*]}" >"$out.tmp/services"
    chmod -R u+w "$out.tmp"
    rm -rf "$out" && mkdir -p "$(dirname "$out")" && mv "$out.tmp" "$out"
    echo "staged provider-aws $provider_aws_version's family packages in $out" >&2
  fi
  echo "provider-aws-package=$out"
}

# stage_kwok_stages: the kwok stages the local plane runs with, from the kwok
# module: Nodes initialize and heartbeat, pods bound to them are created,
# ready and deleted, and the chaos stage makes a labelled Node NotReady.
stage_kwok_stages() {
  local out=$cache/kwok-$kwok_version/stages
  if [[ ! -f $out/node-initialize.yaml ]]; then
    local dir
    dir=$(module_dir hack/tools/kwok sigs.k8s.io/kwok)/kustomize/stage
    stage "$out" "$dir"/node/fast/node-initialize.yaml "$dir"/node/heartbeat/node-heartbeat.yaml \
      "$dir"/node/chaos/node-not-ready.yaml "$dir"/pod/fast/pod-*.yaml
    echo "staged kwok $kwok_version's stages in $out" >&2
  fi
  echo "kwok-stages=$out"
}

stage_crossplane_crds() {
  stage_crds crossplane "$crossplane_version" hack/tools/crossplane github.com/crossplane/crossplane/v2 cluster/crds
}

kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"

# crossplane's version string lives in crossplane-runtime.
crossplane_ldflags="-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$crossplane_version"
crossplane_cli_ldflags="-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$crossplane_cli_version"
clusterctl_ldflags="-X sigs.k8s.io/cluster-api/version.gitVersion=$clusterctl_version -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=14 -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl crane controller-gen golangci-lint crossplane crossplane-cli clusterctl capi-core capi-kcp function-patch-and-transform function-auto-ready provider-kubernetes provider-aws kwok prometheus crds)
for t in "${tools[@]}"; do
  case $t in
    etcd) build etcd "$etcd_version" hack/tools/etcd . ;;
    kube-apiserver) build kube-apiserver "$kube_version" hack/tools/kube ./kube-apiserver "$kube_ldflags" ;;
    kube-controller-manager) build kube-controller-manager "$kube_version" hack/tools/kube ./kube-controller-manager "$kube_ldflags" ;;
    kube-scheduler) build kube-scheduler "$kube_version" hack/tools/kube ./kube-scheduler "$kube_ldflags" ;;
    kubectl) build kubectl "$kube_version" hack/tools/kube ./kubectl "$kube_ldflags" ;;
    crane) build crane "$crane_version" hack/tools/crane github.com/google/go-containerregistry/cmd/crane ;;
    controller-gen) build controller-gen "$controller_gen_version" hack/tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen ;;
    golangci-lint) build golangci-lint "$golangci_lint_version" hack/tools/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-X main.version=$golangci_lint_version" ;;
    crossplane)
      build crossplane "$crossplane_version" hack/tools/crossplane github.com/crossplane/crossplane/v2/cmd/crossplane "$crossplane_ldflags"
      stage_crossplane_crds ;;
    # The clients platform teams install CAPXP with (the install tests and
    # make release run them).
    crossplane-cli) build crossplane-cli "$crossplane_cli_version" hack/tools/crossplane-cli github.com/crossplane/cli/v2/cmd/crossplane "$crossplane_cli_ldflags" ;;
    kwok)
      build kwok "$kwok_version" hack/tools/kwok sigs.k8s.io/kwok/cmd/kwok
      stage_kwok_stages ;;
    clusterctl) build clusterctl "$clusterctl_version" hack/tools/clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl "$clusterctl_ldflags" ;;
    # CAPI's core controller manager, as CAPI ships it: the plane runs it
    # for in-place updates (its Runtime SDK client is internal to CAPI).
    capi-core) build capi-core "$clusterctl_version" hack/tools/clusterctl sigs.k8s.io/cluster-api/core "$clusterctl_ldflags" ;;
    # KubeadmControlPlane's controller manager, as CAPI ships it: the plane
    # runs it for control-plane machines' in-place updates (its Runtime SDK
    # client is internal to CAPI too).
    capi-kcp) build capi-kcp "$clusterctl_version" hack/tools/clusterctl sigs.k8s.io/cluster-api/controlplane/kubeadm "$clusterctl_ldflags" ;;
    # CAPI's test extension's handlers (lifecycle hooks, external patches),
    # for CAPI's ClusterUpgradeRuntimeSDKSpec (make test-capi-e2e only, so
    # not in the default list): hack/tools/capi-test-extension says what
    # its command changes of CAPI's.
    capi-test-extension) build capi-test-extension "$clusterctl_version" hack/tools/capi-test-extension . "$clusterctl_ldflags" main.go ;;
    function-patch-and-transform)
      build function-patch-and-transform "$pat_version" hack/tools/function-patch-and-transform github.com/crossplane-contrib/function-patch-and-transform
      stage_package function-patch-and-transform "$pat_version" hack/tools/function-patch-and-transform github.com/crossplane-contrib/function-patch-and-transform ;;
    function-auto-ready)
      build function-auto-ready "$auto_ready_version" hack/tools/function-auto-ready github.com/crossplane/function-auto-ready
      stage_package function-auto-ready "$auto_ready_version" hack/tools/function-auto-ready github.com/crossplane/function-auto-ready ;;
    provider-kubernetes)
      build provider-kubernetes "$provider_kubernetes_version" hack/tools/provider-kubernetes github.com/crossplane-contrib/provider-kubernetes/cmd/provider
      stage_package provider-kubernetes "$provider_kubernetes_version" hack/tools/provider-kubernetes github.com/crossplane-contrib/provider-kubernetes ;;
    provider-aws) stage_provider_aws ;;
    prometheus) deb prometheus "$prometheus_version" prometheus "$prometheus_deb_version" usr/bin/promtool usr/bin/prometheus ;;
    # The family's service runtimes, for make test-aws: long to build, so no
    # other target builds them. Not the family's config provider
    # (ProviderConfig usage tracking): it links every service's API types,
    # over 10 GB of build cache for no call to AWS.
    provider-aws-runtime)
      for p in "${provider_aws_runtime_services[@]}"; do
        GONOSUMDB=github.com/upbound/terraform-provider-aws \
          build "provider-aws-$p" "$provider_aws_runtime_version" hack/tools/provider-aws "github.com/upbound/provider-aws/v2/cmd/provider/$p"
      done ;;
    crds)
      stage_capi_crds
      stage_kubeadm_crds
      stage_capi_webhooks
      stage_clusterctl_crds
      stage_cert_manager_crds
      stage_prometheus_operator_crds
      stage_crossplane_crds ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
done

# envtest wants etcd and kube-apiserver side by side in one directory; the
# local plane finds kube-controller-manager and kube-scheduler there too.
mkdir -p "$cache/assets"
for bin in etcd-$etcd_version/etcd kube-apiserver-$kube_version/kube-apiserver kube-controller-manager-$kube_version/kube-controller-manager kube-scheduler-$kube_version/kube-scheduler; do
  if [[ -x $cache/$bin ]]; then ln -sfn "$cache/$bin" "$cache/assets/$(basename "$bin")"; fi
done
