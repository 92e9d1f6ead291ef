// Command manifestgen turns the CRDs controller-gen generates from
// apis/infrastructure/v1alpha1 into the manifests CAPXP ships:
//
//   - the composite resource kinds (CrossplaneCluster, CrossplaneMachine)
//     become Crossplane v2 CompositeResourceDefinitions carrying the CAPI
//     contract labels, which Crossplane copies onto the CRDs it generates;
//   - every other kind (the templates) stays a plain CRD and gets the same
//     labels;
//   - every kind's fields are listed in the API reference (docs/api-reference.md).
//
// The XRD schemas are therefore derived from the Go types and never edited by
// hand; `make verify` fails when the committed files are stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/capxp/cluster-api-provider-crossplane/hack/manifestgen/gen"
)

func main() {
	in := flag.String("crds", "", "directory holding the CRDs controller-gen generated")
	xrds := flag.String("xrds", "", "directory to write the XRDs to")
	crds := flag.String("out-crds", "", "directory to write the plain CRDs to")
	ref := flag.String("api-reference", "", "Markdown file to write the API reference of every kind to")
	flag.Parse()

	if *in == "" || *xrds == "" || *crds == "" || *ref == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *xrds, *crds, *ref); err != nil {
		fmt.Fprintln(os.Stderr, "manifestgen:", err)
		os.Exit(1)
	}
}

func run(in, xrds, crds, ref string) error {
	all, err := gen.ReadCRDs(in)
	if err != nil {
		return err
	}
	if err := gen.Run(all, xrds, crds); err != nil {
		return err
	}
	return gen.WriteReference(all, ref)
}
