//go:build tools

// Package tools pins Helm 3, which `cargo xtask e2e linkerd` uses to install
// a real Linkerd 2.20 from the charts it is handed and to swap Meridian in
// with deploy/swap's post-renderer. The harness builds `helm` from this
// module (helm.sh/helm/v3/cmd/helm) and caches it like the kube binaries.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
