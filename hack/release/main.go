// Command release writes what `make release` ships into one folder: the
// clusterctl repository of infrastructure-crossplane, the manager image (an
// OCI layout and a `docker save`-style tarball), crossplane-setup.yaml, and
// the Crossplane packages (the Configurations, the Provider and the
// Function), built with the crossplane CLI, and the archive of the capxp
// command line with what its composition check runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release/cliarchive"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

func main() {
	out := flag.String("out", "out", "Folder to write the release into.")
	version := flag.String("version", "", "Release version; the VERSION file's when empty.")
	repo := flag.String("image-repository", "", "Manager image repository, without a tag; "+release.DefaultImageRepository+" when empty.")
	registry := flag.String("package-registry", "", "Registry (host/path) of the Crossplane packages; "+release.DefaultPackageRegistry+" when empty.")
	binary := flag.String("manager-binary", "", "The capxp binary (static, linux) to put in the manager image; no images when empty.")
	function := flag.String("function-binary", "", "The function-asg-instances binary (static, linux) to put in the Function package's image; needed with -manager-binary.")
	arch := flag.String("arch", "amd64", "The image's CPU architecture: the binary's.")
	cli := flag.String("crossplane-cli", "", "The crossplane CLI that builds the packages; only their roots when empty.")
	toolsDir := flag.String("tools-dir", "", "The tools directory (hack/ensure-tools.sh's) whose crossplane binary, functions and provider CRDs the command line's archive carries, with -manager-binary; no archive when empty.")
	flag.Parse()
	o := release.Options{Version: *version, ImageRepository: *repo, PackageRegistry: *registry}
	bins := release.Binaries{Manager: *binary, Function: *function}
	lines, err := release.Write(context.Background(), *out, o, bins, *arch, *cli)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	switch {
	case *toolsDir == "" || *binary == "":
	case *arch != runtime.GOARCH:
		lines = append(lines, fmt.Sprintf("capxp command line: no archive (the tools here are built for %s, the release for %s)", runtime.GOARCH, *arch))
	default:
		v := *version
		if v == "" {
			v = capxp.Version()
		}
		archive, err := cliarchive.Write(*out, v, bins, tools.Dir(*toolsDir), *arch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		lines = append(lines, "capxp command line, composition check included: "+archive)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}
