// Command release writes what `make release` ships into one folder: the
// clusterctl repository of infrastructure-crossplane, the manager image (an
// OCI layout and a `docker save`-style tarball), and the roots of the
// Crossplane Configuration and Provider packages for `crossplane xpkg build`.
package main

import (
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
	binary := flag.String("manager-binary", "", "The capxp binary (static, linux) to put in the image; no image when empty.")
	arch := flag.String("arch", "amd64", "The image's CPU architecture: the binary's.")
	flag.Parse()
	o := release.Options{Version: *version, ImageRepository: *repo, PackageRegistry: *registry}
	if err := run(*out, o, *binary, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(out string, o release.Options, binary, arch string) error {
	c, err := release.WriteClusterctl(out+"/clusterctl", o)
	if err != nil {
		return err
	}
	fmt.Println("clusterctl components:", c)
	if binary != "" {
		img, err := release.WriteImage(out, o, binary, arch)
		if err != nil {
			return err
		}
		fmt.Println("manager image:", img)
	}
	setup, err := release.CrossplaneSetup(o)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out+"/"+release.CrossplaneSetupFile, setup, 0o644); err != nil { //nolint:gosec // release files are public
		return err
	}
	fmt.Println("Crossplane setup:", out+"/"+release.CrossplaneSetupFile)
	for _, p := range []struct {
		name  string
		write func(string, release.Options) error
	}{{"configuration", release.WriteConfigurationRoot}, {"provider", release.WriteProviderRoot}} {
		dir := out + "/package-" + p.name
		if err := p.write(dir, o); err != nil {
			return err
		}
		fmt.Printf("%s package root: %s\n", p.name, dir)
	}
	return nil
}
