//go:build tools

// The commands this module builds, imported so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/sample-apiserver"
)
