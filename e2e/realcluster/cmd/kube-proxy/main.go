// Command kube-proxy runs the upstream Kubernetes service proxy from the k8s.io/kubernetes
// module on the real node of up.sh (`--real-node`): it routes Service ClusterIPs (the
// `kubernetes` Service the controllers' in-cluster config names) with iptables.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
