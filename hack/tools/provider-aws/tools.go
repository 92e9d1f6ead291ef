//go:build tools

// Package tools pins provider-upjet-aws, the provider the aws Compositions
// compose with, for hack/ensure-tools.sh, which builds the family's
// service providers the Configuration depends on from the Go module proxy, for the aws backend's test against an AWS API
// emulator.
//
// v2.5.0 is the newest v2 release whose whole dependency set the module
// proxy serves. It replaces hashicorp/terraform-provider-aws with Upbound's
// fork (the replace below repeats provider-aws's own, which applies only in
// the main module); the checksum database does not know that fork's
// version, so ensure-tools builds with GONOSUMDB for it alone, and this
// module's go.sum is what pins it.
package tools

import (
	_ "github.com/upbound/provider-aws/v2/cmd/provider/ec2"
	_ "github.com/upbound/provider-aws/v2/cmd/provider/elbv2"
	_ "github.com/upbound/provider-aws/v2/cmd/provider/secretsmanager"
)
