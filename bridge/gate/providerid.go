package gate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
)

// ProviderID expands a Composition's provider ID template (the
// capxp.dev/provider-id annotation) against a machine XR: each {field.path}
// is replaced by that string field of the XR, which must be set. The
// result must be a provider ID (<scheme>://...).
func ProviderID(template string, xr *unstructured.Unstructured) (string, error) {
	p := fieldpath.Pave(xr.Object)
	var b strings.Builder
	rest := template
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			b.WriteString(rest)
			break
		}
		if rest[open] == '}' {
			return "", fmt.Errorf("%q has a } that closes no {", template)
		}
		b.WriteString(rest[:open])
		closing := strings.IndexAny(rest[open+1:], "{}")
		if closing < 0 || rest[open+1+closing] != '}' {
			return "", fmt.Errorf("%q has a { that is not closed", template)
		}
		path := rest[open+1 : open+1+closing]
		if _, err := fieldpath.Parse(path); err != nil || path == "" {
			return "", fmt.Errorf("%q names {%s}, which is not a field path", template, path)
		}
		v, err := p.GetString(path)
		if err != nil || v == "" {
			return "", fmt.Errorf("%q names %s, which the XR does not set to a string", template, path)
		}
		b.WriteString(v)
		rest = rest[open+1+closing+1:]
	}
	id := b.String()
	if !outputs.ValidProviderID(id) {
		return "", fmt.Errorf("%q gives %q, which is not of the form <scheme>://<id>", template, id)
	}
	return id, nil
}
