// Command protobuf-crud drives the cluster of $KUBECONFIG the way client-go's typed
// clients do with protobuf bodies (`application/vnd.kubernetes.protobuf`, as
// controller-runtime and OpenKruise's clients send them): create, get, update, patch,
// list, watch and delete of built-in kinds whose fields use apimachinery's special forms
// (IntOrString, Quantity, Time, MicroTime, bytes, pointers at zero). It checks what comes
// back and exits non-zero on the first difference. kruise-sim's kubectl scenario runs it
// (sim/tests/kubectl-e2e.sh).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

func check(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "protobuf-crud: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func expect(what string, ok bool, got any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "protobuf-crud: %s: got %v\n", what, got)
		os.Exit(1)
	}
}

func main() {
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	check("kubeconfig", err)
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(config)
	check("client", err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	namespace, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "protobuf-crud-"}}, metav1.CreateOptions{})
	check("create namespace", err)
	ns := namespace.Name

	// A Deployment at zero replicas: the pointer's zero must stay zero, not default to 1.
	zero := int32(0)
	surge := intstr.FromString("50%")
	unavailable := intstr.FromInt32(0)
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "nginx:1.25",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
	deployments := client.AppsV1().Deployments(ns)
	created, err := deployments.Create(ctx, deploy, metav1.CreateOptions{})
	check("create deployment", err)
	expect("replicas 0 kept", created.Spec.Replicas != nil && *created.Spec.Replicas == 0, created.Spec.Replicas)
	ru := created.Spec.Strategy.RollingUpdate
	expect("maxSurge 50%", ru != nil && ru.MaxSurge.String() == "50%", ru)
	expect("maxUnavailable 0", ru != nil && ru.MaxUnavailable.IntValue() == 0 && ru.MaxUnavailable.Type == intstr.Int, ru)
	requests := created.Spec.Template.Spec.Containers[0].Resources.Requests
	expect("cpu 100m", requests.Cpu().String() == "100m", requests)
	expect("memory 64Mi", requests.Memory().String() == "64Mi", requests)
	expect("creationTimestamp set", !created.CreationTimestamp.IsZero(), created.CreationTimestamp)

	// Watch, then update (PUT with a protobuf body) and patch.
	w, err := deployments.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: created.ResourceVersion})
	check("watch deployments", err)
	defer w.Stop()
	// The Deployment controller writes it too: read, change, write until no conflict.
	var updated *appsv1.Deployment
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		updated, err = deployments.Update(ctx, current, metav1.UpdateOptions{})
		return err
	})
	check("update deployment", err)
	expect("image updated", updated.Spec.Template.Spec.Containers[0].Image == "nginx:1.26", updated.Spec.Template.Spec.Containers[0].Image)
	expect("generation bumped", updated.Generation == created.Generation+1, updated.Generation)
	for seen := false; !seen; {
		select {
		case ev := <-w.ResultChan():
			d, ok := ev.Object.(*appsv1.Deployment)
			seen = ev.Type == watch.Modified && ok && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.26"
		case <-ctx.Done():
			check("watch the update", ctx.Err())
		}
	}
	_, err = deployments.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{})
	check("patch deployment", err)

	// A Secret's bytes, a Service's IntOrString target port, a Lease's MicroTime.
	secret, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"key": {0, 1, 2, 255}},
	}, metav1.CreateOptions{})
	check("create secret", err)
	expect("secret bytes", string(secret.Data["key"]) == string([]byte{0, 1, 2, 255}), secret.Data)
	service, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	check("create service", err)
	expect("targetPort by name", service.Spec.Ports[0].TargetPort.String() == "http", service.Spec.Ports[0].TargetPort)
	renew := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC))
	holder := "me"
	lease, err := client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew},
	}, metav1.CreateOptions{})
	check("create lease", err)
	expect("renewTime to the microsecond", lease.Spec.RenewTime != nil && lease.Spec.RenewTime.Equal(&renew), lease.Spec.RenewTime)

	// List, then delete with protobuf DeleteOptions (a uid precondition).
	list, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	check("list secrets", err)
	expect("one secret listed", len(list.Items) >= 1, len(list.Items))
	background := metav1.DeletePropagationBackground
	err = deployments.Delete(ctx, "web", metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &updated.UID},
		PropagationPolicy: &background,
	})
	check("delete deployment", err)
	err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	check("delete namespace", err)
	fmt.Println("protobuf-crud: create, get, update, watch, patch, list and delete with protobuf bodies passed")
}
