package asginstances

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
)

const (
	// configAPIVersion is that of provider-aws's credentials configs for
	// namespaced managed resources.
	configAPIVersion = "aws.m.upbound.io/v1beta1"

	kindProviderConfig        = "ProviderConfig"
	kindClusterProviderConfig = "ClusterProviderConfig"

	// sourceSecret is the one credentials source the function reads: the
	// others are identities of the provider's pod, which the function does
	// not have and must not borrow from its own.
	sourceSecret = "Secret"
)

// An access is how the function calls AWS for a group: with the
// credentials, role chain and endpoint the group's provider uses.
type access struct {
	creds aws.Credentials
	roles []assumeRoleSpec
	// endpoint is the Auto Scaling endpoint's URL; empty for AWS's own.
	endpoint string
}

// configSpec is the part of provider-aws's ProviderConfigSpec the function
// reads.
type configSpec struct {
	Credentials struct {
		Source    string     `json:"source"`
		SecretRef *secretRef `json:"secretRef,omitempty"`
	} `json:"credentials"`
	AssumeRoleChain []assumeRoleSpec `json:"assumeRoleChain,omitempty"`
	Endpoint        *endpointSpec    `json:"endpoint,omitempty"`
}

// A secretRef is spec.credentials.secretRef: a key of a Secret.
type secretRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
}

// A configKey identifies a credentials config: a namespace's
// ProviderConfig or a ClusterProviderConfig.
type configKey struct {
	kind, namespace, name string
}

// keyOf returns the key of the config g's provider reads: a ProviderConfig
// is always the group's namespace's, as provider-aws looks it up.
func keyOf(g group) (configKey, error) {
	switch g.config.Kind {
	case kindProviderConfig:
		if g.namespace == "" {
			return configKey{}, errors.Errorf("spec.providerConfigRef names a %s but the managed resource has no namespace", kindProviderConfig)
		}
		return configKey{kind: kindProviderConfig, namespace: g.namespace, name: g.config.Name}, nil
	case kindClusterProviderConfig:
		return configKey{kind: kindClusterProviderConfig, name: g.config.Name}, nil
	}
	return configKey{}, errors.Errorf("spec.providerConfigRef.kind %q is neither %s nor %s", g.config.Kind, kindProviderConfig, kindClusterProviderConfig)
}

// String names the config in messages.
func (k configKey) String() string {
	if k.namespace == "" {
		return fmt.Sprintf("%s %q", k.kind, k.name)
	}
	return fmt.Sprintf("%s %q in namespace %q", k.kind, k.name, k.namespace)
}

// requirement is the name under which the function requires the config.
func (k configKey) requirement() string { return path.Join(k.kind, k.namespace, k.name) }

// A secretKey identifies the key of a Secret holding credentials.
type secretKey struct {
	namespace, name, key string
}

// String names the Secret in messages.
func (s secretKey) String() string {
	return fmt.Sprintf("Secret %q in namespace %q", s.name, s.namespace)
}

// requirement is the name under which the function requires the Secret.
func (s secretKey) requirement() string { return path.Join("Secret", s.namespace, s.name) }

// A resolver finds the access of groups in the resources Crossplane supplied
// with a request, and requires in the response those it reads. It requires
// them from the request alone, so every call with the same request
// declares the same requirements, as Crossplane needs them to settle.
type resolver struct {
	req *fnv1.RunFunctionRequest
	rsp *fnv1.RunFunctionResponse
}

// resolveAccess returns each group's access: nil for a group whose config
// or Secret Crossplane has yet to supply. Every error is one the XR's author
// must fix.
func resolveAccess(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, groups []group) ([]*access, error) {
	r := resolver{req: req, rsp: rsp}
	out := make([]*access, len(groups))
	for i, g := range groups {
		a, err := r.access(g)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot use the credentials of %s", g)
		}
		out[i] = a
	}
	return out, nil
}

// access resolves the access of g as provider-aws does for its managed
// resource (internal/clients: resolveProviderConfigModern, then
// GetAWSConfigWithoutTracking with a Secret source).
func (r resolver) access(g group) (*access, error) {
	k, err := keyOf(g)
	if err != nil {
		return nil, err
	}
	spec, err := r.config(k)
	if spec == nil || err != nil {
		return nil, err
	}
	if spec.Credentials.Source != sourceSecret {
		return nil, errors.Errorf("%s uses credentials source %q: function-asg-instances reads only credentials from a Secret (spec.credentials.source: %s)",
			k, spec.Credentials.Source, sourceSecret)
	}
	sk, err := secretOf(k, spec)
	if err != nil {
		return nil, err
	}
	data, supplied, err := r.secret(k, sk)
	if !supplied || err != nil {
		return nil, err
	}
	creds, err := parseSharedCredentials(data)
	if err != nil {
		return nil, errors.Wrapf(err, "key %q of %s named by %s is not an AWS shared credentials file", sk.key, sk, k)
	}
	a := &access{creds: creds, roles: spec.AssumeRoleChain}
	if a.endpoint, err = autoScalingEndpoint(spec.Endpoint, g.region); err != nil {
		return nil, errors.Wrapf(err, "%s", k)
	}
	for i, role := range a.roles {
		if ptr.Deref(role.RoleARN, "") == "" {
			return nil, errors.Errorf("%s: spec.assumeRoleChain[%d].roleARN is not set", k, i)
		}
	}
	return a, nil
}

// config requires and returns the spec of the config k; nil while Crossplane
// has yet to supply it.
func (r resolver) config(k configKey) (*configSpec, error) {
	sel := &fnv1.ResourceSelector{ApiVersion: configAPIVersion, Kind: k.kind, Match: &fnv1.ResourceSelector_MatchName{MatchName: k.name}}
	if k.namespace != "" {
		sel.Namespace = ptr.To(k.namespace)
	}
	u, supplied, err := r.require(k.requirement(), sel)
	if !supplied || err != nil {
		return nil, err
	}
	if u == nil {
		return nil, errors.Errorf("%s not found", k)
	}
	spec := &configSpec{}
	j, err := json.Marshal(u.Object["spec"])
	if err == nil {
		err = json.Unmarshal(j, spec)
	}
	return spec, errors.Wrapf(err, "cannot read the spec of %s", k)
}

// secretOf returns the Secret key the config names. A namespace's
// ProviderConfig names a Secret of its own namespace whatever
// secretRef.namespace says, as provider-aws reads it (enrichLocalSecretRefs):
// a tenant cannot have the function read another namespace's Secret.
func secretOf(k configKey, spec *configSpec) (secretKey, error) {
	ref := spec.Credentials.SecretRef
	if ref == nil || ref.Name == "" {
		return secretKey{}, errors.Errorf("%s uses credentials source %s but sets no spec.credentials.secretRef.name", k, sourceSecret)
	}
	sk := secretKey{namespace: ref.Namespace, name: ref.Name, key: ref.Key}
	if k.kind == kindProviderConfig {
		sk.namespace = k.namespace
	}
	if sk.namespace == "" {
		return secretKey{}, errors.Errorf("%s sets no spec.credentials.secretRef.namespace", k)
	}
	if sk.key == "" {
		return secretKey{}, errors.Errorf("%s sets no spec.credentials.secretRef.key", k)
	}
	return sk, nil
}

// secret requires the Secret sk and returns its key's content once
// Crossplane has supplied the Secret.
func (r resolver) secret(k configKey, sk secretKey) (data []byte, supplied bool, err error) {
	sel := &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Secret", Match: &fnv1.ResourceSelector_MatchName{MatchName: sk.name}, Namespace: ptr.To(sk.namespace)}
	u, supplied, err := r.require(sk.requirement(), sel)
	if !supplied || err != nil {
		return nil, supplied, err
	}
	if u == nil {
		return nil, true, errors.Errorf("%s named by %s not found", sk, k)
	}
	v, found, err := unstructured.NestedString(u.Object, "data", sk.key)
	if !found || err != nil {
		return nil, true, errors.Errorf("%s named by %s has no key %q", sk, k, sk.key)
	}
	// The error names no content: it is a secret.
	if data, err = base64.StdEncoding.DecodeString(v); err != nil {
		return nil, true, errors.Errorf("key %q of %s named by %s is not base64", sk.key, sk, k)
	}
	return data, true, nil
}

// require declares that the function requires what sel selects, under name,
// and returns it once Crossplane has supplied it: supplied is false until
// Crossplane has looked, u nil when it found nothing.
func (r resolver) require(name string, sel *fnv1.ResourceSelector) (u *unstructured.Unstructured, supplied bool, err error) {
	if r.rsp.GetRequirements() == nil {
		r.rsp.Requirements = &fnv1.Requirements{}
	}
	if r.rsp.GetRequirements().GetResources() == nil {
		r.rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	}
	r.rsp.Requirements.Resources[name] = sel
	rs, supplied, err := request.GetRequiredResource(r.req, name)
	if err != nil {
		return nil, true, errors.Wrapf(err, "cannot read required resource %q", name)
	}
	if len(rs) == 0 {
		return nil, supplied, nil
	}
	return rs[0].Resource, true, nil
}
