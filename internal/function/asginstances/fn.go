package asginstances

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
)

const (
	// SettledTTL is how long Crossplane may keep a response once the list
	// holds as many instances as the groups want.
	SettledTTL = 60 * time.Second

	// ProgressTTL is how soon the function asks to be called again while
	// instances launch or terminate, a group is not named yet (or a
	// NodeGroup reports none yet), or the list could not be made.
	ProgressTTL = 10 * time.Second

	// awsTimeout bounds the AWS calls of one function call.
	awsTimeout = 20 * time.Second
)

// outputField is the XR field the function writes, under status.outputs.
const outputField = "providerIDList"

// Function writes the provider IDs of the running instances of an XR's
// Auto Scaling groups, those of its AutoscalingGroups and of its EKS
// NodeGroups, to the XR's status.outputs.providerIDList.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log  logging.Logger
	http aws.HTTPClient
}

// An Option configures a Function.
type Option func(*Function)

// WithHTTPClient has the function call AWS through c instead of the AWS
// SDK's default client: for tests, or a proxy.
func WithHTTPClient(c aws.HTTPClient) Option {
	return func(f *Function) { f.http = c }
}

// NewFunction returns a Function that logs to log.
func NewFunction(log logging.Logger, opts ...Option) *Function {
	f := &Function{log: log}
	for _, o := range opts {
		o(f)
	}
	return f
}

// RunFunction lists the running instances of the Auto Scaling groups of the
// observed AutoscalingGroups and NodeGroups, with the credentials each
// managed resource's provider uses, and writes their provider IDs to the
// desired XR. It starts from the desired state the
// previous steps left and changes only that field, the requirements, the
// results and the TTL.
func (f *Function) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, SettledTTL)
	log := f.log.WithValues("tag", req.GetMeta().GetTag())

	groups, err := observedGroups(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if len(groups) == 0 {
		log.Debug("No AutoscalingGroup or NodeGroup observed yet")
		return rsp, nil
	}
	acc, err := resolveAccess(req, rsp, groups)
	if err != nil {
		log.Info("Cannot use the credentials of a managed resource", "error", err)
		response.Fatal(rsp, err)
		return rsp, nil
	}
	ids, desired, ok := f.list(ctx, log, rsp, groups, acc)
	if !ok {
		keepObserved(req, rsp)
		rsp.Meta.Ttl = durationpb.New(ProgressTTL)
		return rsp, nil
	}
	values := make([]*structpb.Value, len(ids))
	for i, id := range ids {
		values[i] = structpb.NewStringValue(id)
	}
	setOutput(rsp, structpb.NewListValue(&structpb.ListValue{Values: values}))
	if len(ids) != int(desired) {
		rsp.Meta.Ttl = durationpb.New(ProgressTTL)
	}
	log.Debug("Listed the groups' instances", "instances", len(ids), "desired", desired)
	return rsp, nil
}

// list returns the sorted provider IDs of the groups' running instances and
// the sum of the groups' desired capacities; ok is false when it could not
// list every group. It calls AWS only once every group is named and its
// credentials are supplied, and reports each failure as a warning.
func (f *Function) list(ctx context.Context, log logging.Logger, rsp *fnv1.RunFunctionResponse, groups []group, acc []*access) (ids []string, desired int32, ok bool) {
	for i, g := range groups {
		if acc[i] == nil {
			log.Debug("Waiting for Crossplane to supply required resources", "group", g.String())
			return nil, 0, false
		}
		if g.awsName == "" || g.region == "" {
			log.Debug("Waiting for the group's name and region", "group", g.String())
			return nil, 0, false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	ok = true
	for i, g := range groups {
		l, err := describe(ctx, client(acc[i], g.region, f.http), g.awsName)
		switch {
		case err != nil:
			err = errors.Errorf("cannot list the instances of %s (Auto Scaling group %q in %s): %s", g, g.awsName, g.region, awsError(err))
			log.Info("Cannot list the instances of an Auto Scaling group", "error", err)
			response.Warning(rsp, err)
			ok = false
		case !l.found && g.observed:
			response.Warning(rsp, errors.Errorf("%s: AWS knows no Auto Scaling group %q in %s: was it deleted outside Crossplane?", g, g.awsName, g.region))
			ok = false
		case !l.found:
			// Named only by its external-name annotation: the provider
			// may not have created it yet.
			log.Debug("Waiting for the provider to create the group", "group", g.String())
			ok = false
		}
		ids = append(ids, l.providerIDs...)
		desired += l.desired
	}
	slices.Sort(ids)
	return slices.Compact(ids), desired, ok
}

// keepObserved writes the observed XR's provider ID list, if it has one, to
// the desired XR: Crossplane applies the desired XR's status with
// server-side apply, so a list the pipeline left out would be removed.
func keepObserved(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) {
	outputs := req.GetObserved().GetComposite().GetResource().GetFields()["status"].GetStructValue().GetFields()["outputs"]
	v := outputs.GetStructValue().GetFields()[outputField]
	if v.GetListValue() == nil {
		return
	}
	setOutput(rsp, proto.CloneOf(v))
}

// setOutput sets the desired XR's status.outputs.providerIDList, creating
// the desired XR and its parents as needed and leaving the rest as it is.
func setOutput(rsp *fnv1.RunFunctionResponse, v *structpb.Value) {
	if rsp.GetDesired() == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.GetDesired().GetComposite() == nil {
		rsp.Desired.Composite = &fnv1.Resource{}
	}
	if rsp.GetDesired().GetComposite().GetResource() == nil {
		rsp.Desired.Composite.Resource = &structpb.Struct{}
	}
	child(child(rsp.GetDesired().GetComposite().GetResource(), "status"), "outputs").Fields[outputField] = v
}

// child returns the object under key in s, replacing whatever else is there
// with an empty object.
func child(s *structpb.Struct, key string) *structpb.Struct {
	if s.Fields == nil {
		s.Fields = map[string]*structpb.Value{}
	}
	if c := s.GetFields()[key].GetStructValue(); c != nil {
		if c.Fields == nil {
			c.Fields = map[string]*structpb.Value{}
		}
		return c
	}
	c := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	s.Fields[key] = structpb.NewStructValue(c)
	return c
}
