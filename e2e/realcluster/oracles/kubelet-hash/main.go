// Command kubelet-hash prints the kubelet's hash of a container (HashContainer, which the
// kubelet stores on each container it creates and compares with the pod spec's to decide
// a restart) for each line "NAME<TAB>IMAGE" of stdin, one decimal per line: the oracle of
// kruise_core::inplace::kubelet_hash (core/tests/kubelet_oracle.rs). Built from the module
// of the real node's kubelet, so it is that kubelet's function.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		name, image, ok := strings.Cut(scanner.Text(), "\t")
		if !ok {
			fmt.Fprintf(os.Stderr, "kubelet-hash: want NAME<TAB>IMAGE, got %q\n", scanner.Text())
			os.Exit(2)
		}
		fmt.Println(kubecontainer.HashContainer(&v1.Container{Name: name, Image: image}))
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet-hash:", err)
		os.Exit(1)
	}
}
