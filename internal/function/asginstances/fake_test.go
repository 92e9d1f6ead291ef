package asginstances

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// A fakeAWS answers Auto Scaling's DescribeAutoScalingGroups and STS's
// AssumeRole in the AWS Query protocol (form-encoded POSTs, XML answers),
// and records every call it is made.
type fakeAWS struct {
	groups map[string]fakeGroup

	mu    sync.Mutex
	calls []call
}

// A fakeGroup is an Auto Scaling group as the fake reports it.
type fakeGroup struct {
	desired   int
	instances []fakeInstance
	// paged has the fake answer the group on a second page, after an empty
	// first one.
	paged bool
	// fail has the fake answer with this error code instead.
	fail string
}

// A fakeInstance is an instance of a fakeGroup.
type fakeInstance struct{ id, zone, state string }

// A call is what the fake recorded of a request.
type call struct {
	Action string
	// Name is the group asked for, or the role to assume.
	Name       string
	ExternalID string
	NextToken  string
	// KeyID and Region are those the request was signed with.
	KeyID  string
	Region string
	// Host is the host the client addressed; recorded only by some tests.
	Host string
}

// take returns the calls made since the last take.
func (f *fakeAWS) take() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	keyID, region := signedBy(r.Header.Get("Authorization"))
	c := call{Action: r.PostForm.Get("Action"), KeyID: keyID, Region: region, Host: r.Host, NextToken: r.PostForm.Get("NextToken")}
	switch c.Action {
	case "AssumeRole":
		c.Name, c.ExternalID = r.PostForm.Get("RoleArn"), r.PostForm.Get("ExternalId")
		f.record(c)
		writeXML(w, http.StatusOK, assumeRoleXML(c.Name))
	case "DescribeAutoScalingGroups":
		c.Name = r.PostForm.Get("AutoScalingGroupNames.member.1")
		f.record(c)
		g, ok := f.groups[c.Name]
		switch {
		case g.fail != "":
			writeXML(w, http.StatusForbidden, errorXML(g.fail, "not allowed"))
		case !ok || (g.paged && c.NextToken == ""):
			writeXML(w, http.StatusOK, describeXML("", fakeGroup{}, g.paged && c.NextToken == ""))
		default:
			writeXML(w, http.StatusOK, describeXML(c.Name, g, false))
		}
	default:
		writeXML(w, http.StatusBadRequest, errorXML("InvalidAction", c.Action))
	}
}

func (f *fakeAWS) record(c call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// signedBy returns the access key ID and region of a SigV4 Authorization.
func signedBy(authorization string) (keyID, region string) {
	_, scope, ok := strings.Cut(authorization, "Credential=")
	if !ok {
		return "", ""
	}
	parts := strings.Split(scope, "/")
	if len(parts) < 3 {
		return parts[0], ""
	}
	return parts[0], parts[2]
}

func writeXML(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// describeXML answers DescribeAutoScalingGroups with the group g named
// name, none when name is empty, and a NextToken when more is true.
func describeXML(name string, g fakeGroup, more bool) string {
	b := &strings.Builder{}
	b.WriteString(`<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeAutoScalingGroupsResult><AutoScalingGroups>`)
	if name != "" {
		fmt.Fprintf(b, `<member><AutoScalingGroupName>%s</AutoScalingGroupName><DesiredCapacity>%d</DesiredCapacity><Instances>`, name, g.desired)
		for _, i := range g.instances {
			fmt.Fprintf(b, `<member><InstanceId>%s</InstanceId><AvailabilityZone>%s</AvailabilityZone><LifecycleState>%s</LifecycleState></member>`, i.id, i.zone, i.state)
		}
		b.WriteString(`</Instances></member>`)
	}
	b.WriteString(`</AutoScalingGroups>`)
	if more {
		b.WriteString(`<NextToken>page-2</NextToken>`)
	}
	b.WriteString(`</DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>`)
	return b.String()
}

// roleKeyID is the access key ID the fake's STS returns for role.
func roleKeyID(role string) string { return "ASIA-" + role[strings.LastIndexByte(role, '/')+1:] }

func assumeRoleXML(role string) string {
	return fmt.Sprintf(`<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>`+
		`<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>role-secret</SecretAccessKey><SessionToken>role-token</SessionToken><Expiration>%s</Expiration></Credentials>`+
		`<AssumedRoleUser><Arn>%s/session</Arn><AssumedRoleId>AROA:session</AssumedRoleId></AssumedRoleUser>`+
		`</AssumeRoleResult><ResponseMetadata><RequestId>req-2</RequestId></ResponseMetadata></AssumeRoleResponse>`,
		roleKeyID(role), time.Now().Add(time.Hour).UTC().Format(time.RFC3339), role)
}

func errorXML(code, message string) string {
	return fmt.Sprintf(`<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>req-3</RequestId></ErrorResponse>`, code, message)
}

// loopbackOnly lets requests through to loopback hosts only and answers
// any other with a NotTheTestServer error at once: a call reaches the
// test's server only through an endpoint the function was given.
type loopbackOnly struct{}

func (loopbackOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if ip := net.ParseIP(r.URL.Hostname()); ip != nil && ip.IsLoopback() {
		return http.DefaultTransport.RoundTrip(r)
	}
	body := errorXML("NotTheTestServer", r.URL.Hostname()+" is not the test server")
	return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"text/xml"}},
		Body: io.NopCloser(bytes.NewBufferString(body)), Request: r}, nil
}

// redirect sends every request to the server at to, keeping the host the
// client addressed in the Host header.
type redirect struct{ to *url.URL }

func (t redirect) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = r.URL.Host
	r.URL.Scheme, r.URL.Host = t.to.Scheme, t.to.Host
	return http.DefaultTransport.RoundTrip(r)
}

// st converts a JSON-like value to a Struct.
func st(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("structpb.NewStruct: %v", err)
	}
	return s
}

// strs converts strings to a JSON-like list.
func strs(ss ...string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// observedXR is a CrossplaneMachinePool in namespace team-a whose
// status.outputs.providerIDList is ids, absent when ids is nil.
func observedXR(t *testing.T, ids []string) *fnv1.Resource {
	t.Helper()
	xr := map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
		"kind":       "CrossplaneMachinePool",
		"metadata":   map[string]any{"name": "pool", "namespace": "team-a"},
	}
	if ids != nil {
		xr["status"] = map[string]any{"outputs": map[string]any{"providerIDList": strs(ids...)}}
	}
	return &fnv1.Resource{Resource: st(t, xr)}
}

// groupOpt changes an observed AutoScalingGroup.
type groupOpt func(map[string]any)

// awsName has the provider name the group name in status.atProvider.id.
func awsName(name string) groupOpt {
	return func(g map[string]any) { g["status"] = map[string]any{"atProvider": map[string]any{"id": name}} }
}

// externalName sets the group's crossplane.io/external-name annotation.
func externalName(name string) groupOpt {
	return func(g map[string]any) {
		g["metadata"].(map[string]any)["annotations"] = map[string]any{annotationExternalName: name}
	}
}

// configRefOf sets the group's spec.providerConfigRef.
func configRefOf(kind, name string) groupOpt {
	return func(g map[string]any) {
		g["spec"].(map[string]any)["providerConfigRef"] = map[string]any{"kind": kind, "name": name}
	}
}

// reports has a NodeGroup report, in one entry of
// status.atProvider.resources, the Auto Scaling groups names.
func reports(names ...string) groupOpt {
	return func(g map[string]any) {
		asgs := make([]any, len(names))
		for i, n := range names {
			asgs[i] = map[string]any{"name": n}
		}
		g["status"] = map[string]any{"atProvider": map[string]any{"resources": []any{map[string]any{"autoscalingGroups": asgs}}}}
	}
}

// noNamespace leaves out the resource's metadata.namespace.
func noNamespace() groupOpt {
	return func(g map[string]any) { delete(g["metadata"].(map[string]any), "namespace") }
}

// observedGroup is an AutoScalingGroup named name in team-a and eu-west-1,
// using ProviderConfig aws unless an option says otherwise.
func observedGroup(t *testing.T, name string, opts ...groupOpt) *fnv1.Resource {
	t.Helper()
	return observedManaged(t, "autoscaling.aws.m.upbound.io/v1beta1", "AutoscalingGroup", name, opts...)
}

// observedNodeGroup is the EKS NodeGroup pool-ng in team-a and eu-west-1,
// using ProviderConfig aws and reporting no Auto Scaling group unless an
// option says otherwise.
func observedNodeGroup(t *testing.T, opts ...groupOpt) *fnv1.Resource {
	t.Helper()
	return observedManaged(t, "eks.aws.m.upbound.io/v1beta1", "NodeGroup", "pool-ng", opts...)
}

// observedManaged is a managed resource named name in team-a and
// eu-west-1, using ProviderConfig aws unless an option says otherwise.
func observedManaged(t *testing.T, apiVersion, kind, name string, opts ...groupOpt) *fnv1.Resource {
	t.Helper()
	g := map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "team-a"},
		"spec": map[string]any{
			"forProvider":       map[string]any{"region": "eu-west-1"},
			"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": "aws"},
		},
	}
	for _, o := range opts {
		o(g)
	}
	return &fnv1.Resource{Resource: st(t, g)}
}

// items is a required resource answer: nothing found when rs is empty.
func items(rs ...*fnv1.Resource) *fnv1.Resources { return &fnv1.Resources{Items: rs} }

// config is a provider-aws credentials config with spec.
func config(t *testing.T, kind, namespace, name string, spec map[string]any) *fnv1.Resource {
	t.Helper()
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return &fnv1.Resource{Resource: st(t, map[string]any{"apiVersion": "aws.m.upbound.io/v1beta1", "kind": kind, "metadata": meta, "spec": spec})}
}

// secretName is the name of every credentials Secret of the tests.
const secretName = "aws-creds"

// secretSpec is a spec reading key credentials of Secret aws-creds in
// namespace, with more merged in.
func secretSpec(namespace string, more map[string]any) map[string]any {
	spec := map[string]any{"credentials": map[string]any{
		"source":    "Secret",
		"secretRef": map[string]any{"namespace": namespace, "name": secretName, "key": "credentials"},
	}}
	for k, v := range more {
		spec[k] = v
	}
	return spec
}

// staticEndpoint is a spec.endpoint with a Static URL.
func staticEndpoint(u string, services ...string) map[string]any {
	e := map[string]any{"url": map[string]any{"type": "Static", "static": u}}
	if len(services) > 0 {
		e["services"] = strs(services...)
	}
	return map[string]any{"endpoint": e}
}

// secret is Secret aws-creds in namespace, whose data holds the base64 of
// data's values.
func secret(t *testing.T, namespace string, data map[string]string) *fnv1.Resource {
	t.Helper()
	d := map[string]any{}
	for k, v := range data {
		d[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return &fnv1.Resource{Resource: st(t, map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": secretName, "namespace": namespace},
		"data":     d,
	})}
}
