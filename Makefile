# CAPXP — Cluster API infrastructure provider backed by Crossplane.
#
# Real components (etcd, kube-apiserver, controller-gen, crossplane and the
# composition functions) are built from the Go
# module proxy into .cache/tools by hack/ensure-tools.sh, which also stages the
# CRDs the local plane reads from other modules; nothing is downloaded from
# release pages.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

TOOLS_CACHE ?= $(CURDIR)/.cache/tools
EXAMPLE ?= local
export CAPXP_TOOLS_CACHE := $(TOOLS_CACHE)
ENSURE_TOOLS := hack/ensure-tools.sh
CONTROLLER_GEN = $(shell $(ENSURE_TOOLS) controller-gen | cut -d= -f2)
GOLANGCI_LINT = $(shell $(ENSURE_TOOLS) golangci-lint | cut -d= -f2)
KUBEBUILDER_ASSETS := $(TOOLS_CACHE)/assets
GEN_DIR := .cache/gen

# Generated files `verify` checks.
GENERATED := apis/infrastructure/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml compositions/xrds docs/api-reference.md

GO_TEST_FLAGS ?= -count=1
# Every package but the end-to-end, install, capxp-dev and fault tests, which `test` (the fault tests: `test-all`) runs after
# them, one at a time: the plane's provider-kubernetes needs ports the render
# tests' functions take.
PKGS ?= $(shell go list ./... | grep -v -e /test/e2e -e /test/inplace -e /test/install -e /test/dev -e /test/chaos -e /test/aws)

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

# What the local management plane (bin/capxp-dev, the e2e tests) needs in
# the tools cache: binaries, plus CAPI's and Crossplane's CRDs ("crds").
PLANE_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler crossplane crossplane-cli capi-core capi-kcp function-patch-and-transform function-auto-ready provider-kubernetes kwok provider-aws crds
# What `capxp composition check` runs and reads, which the release's
# command-line archive carries.
CHECK_TOOLS := crossplane function-patch-and-transform function-auto-ready provider-kubernetes provider-aws
# What the install tests need beside the plane.
INSTALL_TOOLS := clusterctl kubectl crane
# What the alerts' rule tests run (Debian's Prometheus package).
MONITORING_TOOLS := prometheus

.PHONY: dev
dev: release ## Run the local management plane with an example cluster (EXAMPLE=local, byo, platform, external, topology, managed or managed-topology; bin/capxp-dev), CAPXP installed from the release's Crossplane packages; Ctrl-C stops it.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	go build -o bin/ ./cmd/capxp-dev
	bin/capxp-dev --tools-dir=$(TOOLS_CACHE) --release=$(RELEASE_DIR) --manager-binary=$(RELEASE_DIR)/bin/capxp --example=$(EXAMPLE)

dev-bare: release ## Run the local management plane with Crossplane and CAPI but no part of CAPXP, to install it as docs/install.md says; Ctrl-C stops it.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	go build -o bin/ ./cmd/capxp-dev
	bin/capxp-dev --tools-dir=$(TOOLS_CACHE) --release=$(RELEASE_DIR) --bare

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, controller-gen, crossplane and the functions into .cache/tools (cold: ~16 min).
	$(ENSURE_TOOLS)

.PHONY: generate
generate: generate-go manifests ## Generate deepcopy code and every manifest.

.PHONY: generate-go
generate-go: ## Generate deepcopy code for apis/.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

.PHONY: manifests
manifests: ## Generate the template CRDs, the XRDs and docs/api-reference.md from apis/, and the manager's RBAC from controllers/.
	rm -rf $(GEN_DIR)/crd
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=$(GEN_DIR)/crd
	$(CONTROLLER_GEN) rbac:roleName=capxp-system-manager paths=./controllers/... output:rbac:dir=config/rbac
	rm -rf compositions/xrds config/crd/bases
	go run ./hack/manifestgen -crds $(GEN_DIR)/crd -xrds compositions/xrds -out-crds config/crd/bases -api-reference docs/api-reference.md

.PHONY: verify
verify: verify-deps verify-api ## Fail when generated files are stale (regenerates and compares), go.mod is untidy, capxp links what it must not, or a served API version changed incompatibly.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tar -cf "$$tmp/before.tar" $(GENERATED); mkdir "$$tmp/before"; tar -xf "$$tmp/before.tar" -C "$$tmp/before"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	stale=; for f in $(GENERATED); do diff -r "$$tmp/before/$$f" "$$f" >/dev/null || { diff -r "$$tmp/before/$$f" "$$f" | head -20; stale=1; }; done; \
	if [ -n "$$stale" ]; then echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }
	@cd test/capi-e2e && go mod tidy -diff >/dev/null || { echo "test/capi-e2e's go.mod/go.sum are not tidy: run 'go mod tidy' there"; exit 1; }
	@echo "generated files are up to date"

# What the product binary must not link: test code, controller-runtime's
# envtest and CAPI's core controllers, which only capxp-dev runs
# (in-process), and the composition function with the AWS SDK, which are
# cmd/function-asg-instances'. CAPI's internal/contract is allowed: its
# public controllers/external, which the bridge uses, wraps it. So are
# CAPI's rollout rules, which capxp plan links rather than imitates: the
# MachineDeployment controller's mdutil and the KubeadmControlPlane's
# public pkg, with the internal utilities they import; and the topology
# controller's generator of a Cluster's desired state
# (exp/topology/desiredstate), with the patch engine, variable handling and
# webhooks' defaulting it imports, which plan runs on a ClusterClass change.
ALLOWED_DEPS := sigs\.k8s\.io/cluster-api/(internal/contract|core/reconcilers/machinedeployment/mdutil|internal/topology/(names|check|clustershim|ownerrefs|selectors|variables)|internal/hooks|internal/util/(compare|inplace|taints|patch)|core/reconcilers/topology/cluster/patches(/(api|external|inline|variables))?|core/webhooks/(admission|conversion))
FORBIDDEN_DEPS := ^github\.com/capxp/cluster-api-provider-crossplane/(test|dev|internal/function)/|^github\.com/aws/|^sigs\.k8s\.io/controller-runtime/pkg/envtest|^sigs\.k8s\.io/cluster-api/core/|^sigs\.k8s\.io/cluster-api/internal/

# The reconcilers' packages under controllers/, and the packages they share,
# which import none of them.
RECONCILER_PKGS := xr|xrd|tenancy
SHARED_CONTROLLER_PKGS := ./controllers/access/ ./controllers/apply/ ./controllers/budget/ ./controllers/caching/ ./controllers/composed/ ./controllers/contracts/ ./controllers/policies/ ./controllers/resolve/ ./controllers/restmapper/ ./controllers/webhook/

.PHONY: verify-deps
verify-deps: ## Fail when cmd/capxp links test code, the development plane (dev/), the composition function or the AWS SDK, envtest or CAPI's core controllers; when internal/, dev/ or cmd/ import test/; when internal/ imports controllers/; when bridge/ imports more than apis/ and bridge/, or an API client; or when the packages below controllers/ import upward.
	@deps=$$(go list -deps ./cmd/capxp) || exit 1; \
	bad=$$(echo "$$deps" | grep -E '$(FORBIDDEN_DEPS)' | grep -vxE '$(ALLOWED_DEPS)'); \
	if [ -n "$$bad" ]; then echo "cmd/capxp links packages only capxp-dev and the tests may use:"; echo "$$bad"; exit 1; fi; \
	tests=$$(go list -deps -test ./internal/... ./dev/... ./cmd/... | grep '^github.com/capxp/cluster-api-provider-crossplane/test/'); \
	if [ -n "$$tests" ]; then echo "internal/, dev/ or cmd/ import test/:"; echo "$$tests"; exit 1; fi; \
	up=$$(go list -deps ./internal/... | grep '^github.com/capxp/cluster-api-provider-crossplane/\(controllers\|dev\|cmd\)\(/\|$$\)'); \
	if [ -n "$$up" ]; then echo "internal/ imports a layer above it:"; echo "$$up"; exit 1; fi; \
	up=$$(go list -deps ./bridge/... | grep '^github.com/capxp/cluster-api-provider-crossplane/' | grep -v '^github.com/capxp/cluster-api-provider-crossplane/\(apis/\|bridge\(/\|$$\)\)'); \
	if [ -n "$$up" ]; then echo "bridge/ imports more than apis/ and bridge/:"; echo "$$up"; exit 1; fi; \
	io=$$(go list -f '{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}' ./bridge/... | grep -E ' (sigs.k8s.io/controller-runtime/pkg/client|k8s.io/client-go/rest|k8s.io/client-go/kubernetes)( |$$)' | cut -d: -f1); \
	if [ -n "$$io" ]; then echo "bridge/ reads the API server (it decides on values; controllers/ reads):"; echo "$$io"; exit 1; fi; \
	below=$$(go list ./controllers/... | grep -vx 'github.com/capxp/cluster-api-provider-crossplane/controllers'); \
	up=$$(go list -deps $$below | grep -x 'github.com/capxp/cluster-api-provider-crossplane/controllers'); \
	if [ -n "$$up" ]; then echo "a package below controllers/ imports the manager's setup:"; echo "$$up"; exit 1; fi; \
	up=$$(go list -deps $(SHARED_CONTROLLER_PKGS) | grep -xE 'github.com/capxp/cluster-api-provider-crossplane/controllers/($(RECONCILER_PKGS))'); \
	if [ -n "$$up" ]; then echo "a shared package below controllers/ imports a reconciler's:"; echo "$$up"; exit 1; fi; \
	up=$$(go list -deps ./controllers/xr/ ./controllers/tenancy/ | grep -xE 'github.com/capxp/cluster-api-provider-crossplane/controllers/xrd'); \
	if [ -n "$$up" ]; then echo "a reconciler imports the XRD adapter, which runs it:"; echo "$$up"; exit 1; fi; \
	echo "cmd/capxp links $$(echo "$$deps" | wc -l) packages, none of test/, dev/, internal/function, the AWS SDK, envtest or CAPI's core controllers"

.PHONY: verify-api
verify-api: ## Fail when an API version the previous release served (an XRD's or a CRD's) lost a field, a type, a value or its version, or gained a required field (internal/apicompat; the release in internal/release/previous.go).
	@go run ./hack/apicompat

.PHONY: lint
lint: ## Run golangci-lint v2 (.golangci.yml: the linters, go vet among them, and gofmt/goimports) over the module and test/capi-e2e's; builds it pinned on first use.
	$(GOLANGCI_LINT) run ./...
	cd test/capi-e2e && $(GOLANGCI_LINT) run --build-tags e2e --config $(CURDIR)/.golangci.yml ./...

##@ Test

.PHONY: test
test: ## Run unit, integration, composition, end-to-end, install and capxp-dev tests on real components (builds them on first use), then fuzz each target for 30000 executions. CI runs this.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) $(INSTALL_TOOLS) $(MONITORING_TOOLS) >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) $(PKGS)
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -p 1 -timeout 45m -skip '$(INSTALL_TEST_ALL_ONLY)' ./test/e2e/ ./test/inplace/ ./test/install/ ./test/dev/
	$(MAKE) --no-print-directory fuzz

# The install tests only make test-all runs, as CAPI runs its clusterctl
# upgrade and self-hosted specs periodically rather than on every change:
# clusterctl move between two planes and back (two planes, about 6 minutes;
# the aws backend's move test, make test-aws, covers it too) and the upgrade
# from the previous release on both install paths (four planes, 6 to 12
# minutes).
INSTALL_TEST_ALL_ONLY := ^(TestClusterctlMove|TestUpgrade)$$

.PHONY: test-all
test-all: test ## Run make test, then clusterctl move between two planes and the upgrade from the previous release (test/install TestClusterctlMove and TestUpgrade, ~15 min), the fault tests (test/chaos, ~13 min), the aws backend's (make test-aws) and CAPI's own e2e specs (make test-capi-e2e, ~40 min), which a CI run has no room for.
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -timeout 45m -run '$(INSTALL_TEST_ALL_ONLY)' ./test/install/
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -p 1 -timeout 30m ./test/chaos/
	$(MAKE) --no-print-directory test-aws
	$(MAKE) --no-print-directory test-capi-e2e

# The fuzz targets (package directory:target); each runs FUZZ_TIME from its
# seed corpus in testdata/fuzz. FUZZ_TIME is a count of executions, not a
# duration: with a duration, Go's fuzz coordinator (1.26) can fail a target
# with "context deadline exceeded" as the time runs out on a loaded machine
# (golang/go#75804, fixed in Go 1.27), a failure with no failing input.
FUZZ_TARGETS := bridge/outputs:FuzzMapCluster bridge/outputs:FuzzMapMachine bridge/outputs:FuzzMapControlPlane bridge/outputs:FuzzMapMachinePool bridge/readiness:FuzzObserve bridge/gate:FuzzDecide bridge/xrd:FuzzCheck bridge/credentials:FuzzGranted bridge/credentials:FuzzSharedInSecret bridge/credentials:FuzzUsable bridge/kubeconfig:FuzzUsable controllers/policies:FuzzKubeconfigPatterns controllers/tenancy:FuzzDecide internal/leanjson:FuzzStripManagedFields
FUZZ_TIME ?= 30000x

.PHONY: fuzz
fuzz: ## Fuzz output mapping, readiness, the gate, the XRD check, the grant check, the credentials record and its reconcile's plan, kubeconfig judging, the kubeconfig policy's patterns and the cache's managed-field stripping for FUZZ_TIME each (make test: 30000x, 30 000 executions, 1–15 s a target); a failing input is written to the package's testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  out=$$(go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_TIME) ./$$pkg 2>&1) || { echo "$$out"; exit 1; }; \
	  echo "$$fn: $$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2) executions, no failure"; \
	done

.PHONY: test-install
test-install: ## Install the release with the real clusterctl and with Crossplane's package manager (from a TLS registry) on the local plane; provision, describe, trace and delete; move a cluster between two planes with clusterctl move and back.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) $(INSTALL_TOOLS) >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -timeout 45m -v ./test/install/

.PHONY: test-chaos
test-chaos: ## Run CAPXP under faults on the local plane: the manager killed outright 20 times, two replicas losing their leader, capxp-dev ended every way; counts what is left, orphaned or duplicated.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -p 1 -timeout 30m -v ./test/chaos/ ./test/dev/

.PHONY: test-aws
test-aws: ## Provision, pause, roll out, scale a machine pool of, clusterctl-move and delete a cluster (network, load balancer, machines, an auto scaling group) on the aws backend with the real provider-upjet-aws family against moto_server, an AWS API emulator on loopback (~20 min; the providers' first build ~33 min and ~11 GB of Go build cache).
	$(ENSURE_TOOLS) $(PLANE_TOOLS) provider-aws-runtime >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -timeout 60m -v ./test/aws/

.PHONY: test-capi-e2e
test-capi-e2e: ## Run Cluster API's own e2e specs (sigs.k8s.io/cluster-api/test, unchanged) against CAPXP installed with clusterctl on the local plane, then its in-place update spec on a plane of CAPI's binaries with InPlaceUpdates; prints Ginkgo's summary of each (Ran N of M Specs ... SUCCESS). ARTIFACTS=dir keeps what each spec dumped.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) $(INSTALL_TOOLS) capi-test-extension >/dev/null
	cd test/capi-e2e && KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test -tags e2e $(GO_TEST_FLAGS) -timeout 60m -v . -args -ginkgo.v -ginkgo.label-filter='!in-place && !runtime-sdk'
	cd test/capi-e2e && KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test -tags e2e $(GO_TEST_FLAGS) -timeout 30m -v . -args -ginkgo.v -ginkgo.label-filter='in-place || runtime-sdk' -capxp.in-place-updates

.PHONY: test-e2e
test-e2e: ## Run the end-to-end tests on the local management plane.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) -timeout 20m -v ./test/e2e/

.PHONY: reviewable
reviewable: generate lint test ## Generate, lint and test: what a change needs before review.

BENCH_CLUSTERS ?= 10
BENCH_MACHINES ?= 3
# BENCH_FLAGS=-shared runs every level on one API server and etcd (each level's workload deleted before the next); by default each level has its own.
# BENCH_FLAGS=-order=L0,L2,L2-reported runs each level once, in that order (half the time; the ratios then carry each level's place in the run).
BENCH_FLAGS ?=

.PHONY: bench
bench: ## Provision BENCH_CLUSTERS x BENCH_MACHINES machines behind an ideal provider (L0) and behind CAPXP's bridge (L2: provider IDs declared; L2-reported: reported), each level twice (forward, then backward), and print their costs side by side.
	$(ENSURE_TOOLS) etcd kube-apiserver >/dev/null
	CAPXP_BENCH=1 KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test -count=1 -timeout 120m -v -run 'TestBench$$' ./test/bench/ -args -clusters=$(BENCH_CLUSTERS) -machines=$(BENCH_MACHINES) $(BENCH_FLAGS)

.PHONY: bench-large
bench-large: ## The benchmark at N = 1000, as 100 clusters x 10 machines and as 10 x 100; not in CI (35 to 120 minutes here, as busy as the machine is).
	$(MAKE) bench BENCH_CLUSTERS=100 BENCH_MACHINES=10
	$(MAKE) bench BENCH_CLUSTERS=10 BENCH_MACHINES=100

BENCH_PLANE_MACHINES ?= 30

.PHONY: bench-plane
bench-plane: ## L3: the example cluster scaled to BENCH_PLANE_MACHINES machines on the real local plane; the bridge's CPU next to Crossplane's, its heap per cached object.
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	go build -o bin/ ./cmd/capxp
	CAPXP_BENCH_PLANE=1 CAPXP_MANAGER_BINARY=$(CURDIR)/bin/capxp KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test -count=1 -timeout 60m -v -run TestBenchPlane ./test/bench/ -args -plane-machines=$(BENCH_PLANE_MACHINES)

BENCH_INPLACE_MACHINES ?= 100
BENCH_INPLACE_BATCH ?= 10

.PHONY: bench-inplace
bench-inplace: ## The size of every worker of a BENCH_INPLACE_MACHINES-machine MachineDeployment changed in place through CAPXP's extension, then the same kind of change rolled with the extension unregistered, side by side on the real plane; prints each one's time, Machines replaced and CPU. Not in CI (about 15 minutes at 100).
	$(ENSURE_TOOLS) $(PLANE_TOOLS) >/dev/null
	CAPXP_BENCH_INPLACE=1 KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test -count=1 -timeout 90m -v -run 'TestBenchInPlace$$' ./test/inplace/ -args -bench-machines=$(BENCH_INPLACE_MACHINES) -bench-batch=$(BENCH_INPLACE_BATCH)

.PHONY: test-compositions
test-compositions: ## Render every Composition with Crossplane's engine and the real functions; UPDATE=1 rewrites the golden files.
	$(ENSURE_TOOLS) etcd kube-apiserver crossplane function-patch-and-transform function-auto-ready >/dev/null
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) go test $(GO_TEST_FLAGS) ./compositions/ $(if $(UPDATE),-args -update)

##@ Build

RELEASE_DIR ?= out
VERSION ?= $(shell cat VERSION)
IMAGE_REPOSITORY ?=
PACKAGE_REGISTRY ?=
ARCH ?= $(shell go env GOARCH)
CROSSPLANE_CLI = $(shell $(ENSURE_TOOLS) crossplane-cli | cut -d= -f2)

.PHONY: release
release: ## Build a release into RELEASE_DIR (out/): clusterctl provider files, the manager image (OCI layout and tarball), crossplane-setup.yaml, the Crossplane packages (.xpkg) and the capxp command line's archive (composition check included).
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) go build -trimpath -buildvcs=auto -ldflags "-s -w" -o $(RELEASE_DIR)/bin/ ./cmd/capxp ./cmd/function-asg-instances
	$(ENSURE_TOOLS) $(CHECK_TOOLS) >/dev/null
	go run ./hack/release -out $(RELEASE_DIR) -version $(VERSION) -arch $(ARCH) -manager-binary $(RELEASE_DIR)/bin/capxp -function-binary $(RELEASE_DIR)/bin/function-asg-instances -crossplane-cli $(CROSSPLANE_CLI) -tools-dir $(TOOLS_CACHE) \
		$(if $(IMAGE_REPOSITORY),-image-repository $(IMAGE_REPOSITORY)) $(if $(PACKAGE_REGISTRY),-package-registry $(PACKAGE_REGISTRY))
	@echo "release $(VERSION) in $(RELEASE_DIR)/"

.PHONY: build
build: ## Build bin/capxp, bin/capxp-dev and bin/function-asg-instances (and compile every package).
	go build ./...
	go build -buildvcs=auto -o bin/ ./cmd/capxp ./cmd/capxp-dev ./cmd/function-asg-instances
