package compcheck

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestComposedResourceRules(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"}},
	}}
	mr := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "Instance", "spec": spec}}
		if kind != "" {
			_ = unstructured.SetNestedField(u.Object, map[string]any{"kind": kind, "name": name}, "spec", "providerConfigRef")
		}
		return u
	}
	cases := map[string]struct {
		reason   string
		composed *unstructured.Unstructured
		field    string
		ok       bool
		says     string
	}{
		"CredentialsPassed": {
			reason: "the XR's ProviderConfig, on a resource of its provider", field: FieldCredentials, ok: true,
			composed: mr("ec2.aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", map[string]any{}),
		},
		"NoCredentials": {
			reason: "no providerConfigRef: the provider's default credentials", field: FieldCredentials,
			composed: mr("ec2.aws.m.upbound.io/v1beta1", "", "", map[string]any{}), says: "default credentials",
		},
		"OtherName": {
			reason: "another ProviderConfig than the XR's", field: FieldCredentials,
			composed: mr("ec2.aws.m.upbound.io/v1beta1", "ProviderConfig", "default", map[string]any{}), says: "want the XR's ProviderConfig team-a",
		},
		"OtherProvider": {
			reason: "the XR's ProviderConfig belongs to another provider than the resource's", field: FieldCredentials,
			composed: mr("kubernetes.m.crossplane.io/v1alpha1", "ProviderConfig", "team-a", map[string]any{}), says: "cannot use a ProviderConfig of aws.m.upbound.io",
		},
		"BootstrapByName": {
			reason: "the Secret named, its content left there", field: FieldBootstrapByRef, ok: true,
			composed: mr("secretsmanager.aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", map[string]any{"secretStringSecretRef": map[string]any{"name": "m-bootstrap"}}),
		},
		"BootstrapInlined": {
			reason: "the bootstrap data copied into user data", field: FieldBootstrapByRef,
			composed: mr("ec2.aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", map[string]any{"forProvider": map[string]any{"userData": BootstrapData}}), says: "holds the bootstrap data",
		},
		"BootstrapInlinedBase64": {
			reason: "the bootstrap data copied base64-encoded", field: FieldBootstrapByRef,
			composed: mr("ec2.aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", map[string]any{"forProvider": map[string]any{"userDataBase64": base64.StdEncoding.EncodeToString([]byte(BootstrapData))}}), says: "holds the bootstrap data",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			composed := []*unstructured.Unstructured{tc.composed}
			v := credentials(xr, composed)
			if tc.field == FieldBootstrapByRef {
				v = bootstrapByReference(composed)
			}
			if v.OK != tc.ok || !strings.Contains(v.Reason, tc.says) {
				t.Errorf("%s: %s = %t %q, want %t saying %q", tc.reason, v.Field, v.OK, v.Reason, tc.ok, tc.says)
			}
		})
	}
}

func TestDeletion(t *testing.T) {
	mr := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "VPC", "spec": spec,
			"metadata": map[string]any{"annotations": map[string]any{"crossplane.io/composition-resource-name": "vpc"}}}}
	}
	cases := map[string]struct {
		reason string
		spec   map[string]any
		ok     bool
		says   string
	}{
		"Default":     {reason: "no policies: the CRD's default, everything", spec: map[string]any{}, ok: true},
		"All":         {reason: "every action", spec: map[string]any{"managementPolicies": []any{"*"}}, ok: true},
		"ObserveOnly": {reason: "observed only: never created, never deleted", spec: map[string]any{"managementPolicies": []any{"Observe"}}, ok: true, says: "observed only, never created or deleted: VPC vpc"},
		"NoDelete":    {reason: "created, never deleted", spec: map[string]any{"managementPolicies": []any{"Observe", "Create", "Update"}}, says: "left behind when the cluster is deleted: VPC vpc"},
		"Orphan":      {reason: "a legacy resource orphaned on deletion", spec: map[string]any{"deletionPolicy": "Orphan"}, says: "left behind"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := deletion([]*unstructured.Unstructured{mr(tc.spec)})
			if v.OK != tc.ok || !strings.Contains(v.Reason, tc.says) {
				t.Errorf("%s: %t %q, want %t saying %q", tc.reason, v.OK, v.Reason, tc.ok, tc.says)
			}
		})
	}
}
