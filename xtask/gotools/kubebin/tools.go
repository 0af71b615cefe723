//go:build tools

// Package tools pins the Kubernetes binaries that Meridian's tests run
// (kube-apiserver, kube-controller-manager; for the real local node also
// kube-scheduler, kubelet and kube-proxy) and the kubectl they drive it
// with, all of one version. Nothing here is imported by Meridian itself;
// `cargo xtask cluster build` builds the commands from this module with the
// machine's Go toolchain.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
