// Command release writes what `make release` ships into one folder: the
// clusterctl repository of infrastructure-crossplane, the manager image (an
// OCI layout and a `docker save`-style tarball), crossplane-setup.yaml, and
// the Crossplane packages (the Configurations, the Provider and the
// Function), built with the crossplane CLI.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
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
	flag.Parse()
	o := release.Options{Version: *version, ImageRepository: *repo, PackageRegistry: *registry}
	lines, err := release.Write(context.Background(), *out, o, release.Binaries{Manager: *binary, Function: *function}, *arch, *cli)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}
