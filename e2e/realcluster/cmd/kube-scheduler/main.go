// Command kube-scheduler runs the upstream Kubernetes scheduler from the
// k8s.io/kubernetes module with its default plugins and every flag upstream
// accepts.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
