// Command kube-apiserver runs the upstream Kubernetes API server from the
// k8s.io/kubernetes module, with every flag upstream accepts.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
