//go:build tools

// Package tools pins the Kubernetes control-plane binaries that Meridian's
// tests run (kube-apiserver, kube-controller-manager). Nothing here is
// imported by Meridian itself; `cargo xtask cluster build` builds the two
// commands from this module with the machine's Go toolchain.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
