//go:build tools

// Package tools pins the etcd server that backs the local kube-apiserver in
// Meridian's tests. `cargo xtask cluster build` builds it from this module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
