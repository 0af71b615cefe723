// Command coredns is the cluster DNS server of Meridian's local real node:
// CoreDNS (pinned in go.mod) with only the plugins that node's Corefile
// uses, compiled in through CoreDNS's documented way of choosing plugins at
// build time (blank imports plus the directive order).
//
// There is no forward, grpc, etcd, file or any other plugin that could send
// a query elsewhere: the server answers the names of its own zones
// (cluster.local and the reverse zones of the node's ranges) from the
// Kubernetes API and refuses everything else, so no DNS query ever leaves
// the machine. `cargo xtask cluster up --real-node` builds it with the
// machine's Go toolchain and caches it by version.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin chain order, a subset of CoreDNS's own
// (core/dnsserver/zdirectives.go): a plugin sees a query before the ones
// after it, whatever the order in the Corefile.
var directives = []string{
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
