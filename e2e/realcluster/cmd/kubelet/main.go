// Command kubelet runs the upstream Kubernetes node agent from the k8s.io/kubernetes
// module, for the real node of up.sh (`--real-node`), with every flag upstream accepts.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
