//go:build tools

// Package tools pins golangci-lint for `make lint`.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
