// Prints the Go values the quantity and image tests of kruise_core::api::{quantity,
// pod_defaults} expect: `go run ./quantities 0.5 1Gi img:nginx:latest`.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/kubernetes/pkg/util/parsers"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	v1 "k8s.io/kubernetes/pkg/apis/core/v1"
)

// main reads its inputs from the arguments or, with none, one per line from stdin (the
// differential test in cloneset/tests/openkruise_oracle.rs feeds thousands).
func main() {
	inputs := os.Args[1:]
	if len(inputs) == 0 {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			inputs = append(inputs, scanner.Text())
		}
	}
	for _, s := range inputs {
		if strings.HasPrefix(s, "img:") {
			_, tag, _, err := parsers.ParseImageName(s[4:])
			fmt.Printf("%q tag=%q err=%v\n", s[4:], tag, err != nil)
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			fmt.Printf("%q ERR\n", s)
			continue
		}
		l := corev1.ResourceList{"cpu": q}
		v1.SetDefaults_ResourceList(&l)
		b, _ := json.Marshal(l)
		fmt.Printf("%q %s\n", s, b)
	}
}
