// Command kube-controller-manager runs the upstream Kubernetes controller
// manager from the k8s.io/kubernetes module, with every flag upstream accepts.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
