#!/usr/bin/env bash
# Builds the real components the tests run (etcd, kube-apiserver,
# kube-controller-manager, controller-gen, crossplane and the composition
# functions) from the Go module proxy into a
# git-ignored cache keyed by tool and version, and skips what already exists.
# Nothing here downloads a release binary: each tool has its own module under
# hack/tools with a committed go.mod and go.sum, so the project's module never
# pulls in Kubernetes or etcd.
#
# Usage: hack/ensure-tools.sh [tool...]   (default: all)
# Prints the directory of every binary, one "name=path" per line.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CAPXP_TOOLS_CACHE:-$root/.cache/tools}

etcd_version=v3.6.16
kube_version=v1.36.3
controller_gen_version=v0.21.0
crossplane_version=v2.3.4
pat_version=v0.10.7
auto_ready_version=v0.6.0
provider_kubernetes_version=v1.2.1

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]
build() {
  local name=$1 version=$2 moddir=$3 pkg=$4 ldflags=${5:-}
  local out=$cache/$name-$version/$name
  if [[ ! -x $out ]]; then
    echo "building $name $version (cold builds take minutes; later runs reuse $out)" >&2
    local start=$SECONDS
    mkdir -p "$(dirname "$out")"
    (cd "$root/$moddir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "built $name in $((SECONDS - start))s" >&2
  fi
  echo "$name=$out"
}

kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"

# crossplane's version string lives in crossplane-runtime.
crossplane_ldflags="-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$crossplane_version"

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kube-apiserver kube-controller-manager controller-gen crossplane function-patch-and-transform function-auto-ready provider-kubernetes)
for t in "${tools[@]}"; do
  case $t in
    etcd) build etcd "$etcd_version" hack/tools/etcd . ;;
    kube-apiserver) build kube-apiserver "$kube_version" hack/tools/kube ./kube-apiserver "$kube_ldflags" ;;
    kube-controller-manager) build kube-controller-manager "$kube_version" hack/tools/kube ./kube-controller-manager "$kube_ldflags" ;;
    controller-gen) build controller-gen "$controller_gen_version" hack/tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen ;;
    crossplane) build crossplane "$crossplane_version" hack/tools/crossplane github.com/crossplane/crossplane/v2/cmd/crossplane "$crossplane_ldflags" ;;
    function-patch-and-transform) build function-patch-and-transform "$pat_version" hack/tools/function-patch-and-transform github.com/crossplane-contrib/function-patch-and-transform ;;
    function-auto-ready) build function-auto-ready "$auto_ready_version" hack/tools/function-auto-ready github.com/crossplane/function-auto-ready ;;
    provider-kubernetes) build provider-kubernetes "$provider_kubernetes_version" hack/tools/provider-kubernetes github.com/crossplane-contrib/provider-kubernetes/cmd/provider ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
done

# envtest wants etcd and kube-apiserver side by side in one directory; the
# local plane finds kube-controller-manager there too.
mkdir -p "$cache/assets"
for bin in etcd-$etcd_version/etcd kube-apiserver-$kube_version/kube-apiserver kube-controller-manager-$kube_version/kube-controller-manager; do
  if [[ -x $cache/$bin ]]; then ln -sfn "$cache/$bin" "$cache/assets/$(basename "$bin")"; fi
done
