#!/usr/bin/env bash
# Starts or stops a real Kubernetes control plane for tests: embedded etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler, all built from
# Kubernetes' own Go modules (see go.mod) and all listening on 127.0.0.1 only.
#
#   up.sh start DIR   build (cached), write certificates and kubeconfigs into
#                     DIR, start the four processes, wait for /readyz, print
#                     `export KUBECONFIG=DIR/kubeconfig`
#   up.sh start DIR --real-node
#                     the same, plus a real node (node.sh: containerd, CNI, the
#                     kubelet and kube-proxy); the API server then also listens
#                     on the node's address, which the `kubernetes` Service
#                     names, so pods reach it
#   up.sh stop DIR    stop the processes started for DIR (and its real node)
#
# DIR holds everything of one run: pki/, etcd/, logs/, pids/, kubeconfig.
# Ports (all on 127.0.0.1) can be moved with REALCLUSTER_APISERVER_PORT
# (6443), REALCLUSTER_ETCD_PORT (2379; its peer listener takes the next port),
# REALCLUSTER_CONTROLLER_MANAGER_PORT (10257), REALCLUSTER_SCHEDULER_PORT
# (10259). REALCLUSTER_CONTROLLERS replaces the controller manager's list.
# Binaries go to REALCLUSTER_BIN (default: bin/ next to this script); the Go
# module and build caches stay where `go env` puts them, outside the clone.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/realcluster/process-lib.sh
source "$script_dir/process-lib.sh"
bin="${REALCLUSTER_BIN:-$script_dir/bin}"
apiserver_port="${REALCLUSTER_APISERVER_PORT:-6443}"
etcd_port="${REALCLUSTER_ETCD_PORT:-2379}"
etcd_peer_port=$((etcd_port + 1))
controller_manager_port="${REALCLUSTER_CONTROLLER_MANAGER_PORT:-10257}"
scheduler_port="${REALCLUSTER_SCHEDULER_PORT:-10259}"
# The controllers the kruise-rs families and their tests rely on: owners and
# garbage collection, the built-in workloads, namespaces, and what a pod needs
# before it is admitted (default service account, its token, kube-root-ca.crt).
default_controllers="garbage-collector-controller,deployment-controller,replicaset-controller"
default_controllers+=",statefulset-controller,job-controller,ttl-after-finished-controller"
default_controllers+=",namespace-controller,serviceaccount-controller,serviceaccount-token-controller"
default_controllers+=",root-ca-certificate-publisher-controller,clusterrole-aggregation-controller"
default_controllers+=",disruption-controller,endpointslice-controller,pod-garbage-collector-controller"
# Nodes: kruise-sim's simulated nodes renew their Leases, so node lifecycle keeps them
# Ready (and marks a Node without a kubelet unreachable); DaemonSets run on them.
default_controllers+=",node-lifecycle-controller,daemonset-controller"
# PVC and PV protection: the finalizers admission puts on them are taken off again, so a
# namespace with claims (OpenKruise's e2e specs make them) can be deleted.
default_controllers+=",persistentvolumeclaim-protection-controller,persistentvolume-protection-controller"
# Volumes: the PV binder binds a claim to the volume `kruise-sim nodes` provisions for it
# (pre-bound by claimRef), and marks it Released when the claim goes.
default_controllers+=",persistentvolume-binder-controller"
controllers="${REALCLUSTER_CONTROLLERS:-$default_controllers}"
ready_timeout_seconds="${REALCLUSTER_READY_TIMEOUT:-120}"

usage() {
	echo "usage: $0 start DIR [--real-node] | stop DIR" >&2
	exit 2
}

now_ms() { date +%s%3N; }

# The sources the binaries are built from, and the Go that builds them: when $bin/.sources
# holds this, the binaries are up to date. (`go build` alone would relink all five, ~40 s,
# whenever the clone sits in another directory than the last build's, as a CI clone does.)
sources_stamp() {
	(cd "$script_dir" && go version && version_flags && sha256sum go.mod go.sum $(find cmd -type f | sort)) | sha256sum
}

# The Kubernetes version the binaries report (`kubectl version`, the Node's kubeletVersion):
# upstream's release builds stamp it at link time; from go.mod here.
version_flags() {
	local version
	version=$(cd "$script_dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
	local major=${version#v} minor
	minor=${major#*.}
	minor=${minor%%.*}
	major=${major%%.*}
	local pkg=k8s.io/component-base/version
	echo "-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

all_built() {
	local command
	for command in "$script_dir"/cmd/*/; do
		[[ -x $bin/$(basename "$command") ]] || return 1
	done
}

build() {
	local started stamp
	started=$(now_ms)
	stamp=$(sources_stamp)
	if [[ -f $bin/.sources && $(cat "$bin/.sources") == "$stamp" ]] && all_built; then
		echo "up to date: $bin" >&2
		return
	fi
	(cd "$script_dir" && go build -ldflags "$(version_flags)" -o "$bin/" ./cmd/...)
	echo "$stamp" >"$bin/.sources"
	echo "built in $(($(now_ms) - started)) ms: $bin" >&2
}

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

https_ok() {
	curl --silent --fail --max-time 5 --cacert "$dir/pki/ca.crt" \
		--cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "$1"
}

# The controller manager and scheduler serve /healthz with a self-signed
# certificate of their own; only liveness is read from it.
https_insecure_ok() {
	curl --silent --fail --max-time 5 --insecure "$1"
}

start() {
	for port in "$apiserver_port" "$etcd_port" "$etcd_peer_port" "$controller_manager_port" "$scheduler_port"; do
		if port_in_use "$port"; then
			echo "port 127.0.0.1:$port is already in use (another run? try: $0 stop DIR)" >&2
			exit 1
		fi
	done
	build
	local started
	started=$(now_ms)
	mkdir -p "$dir/logs" "$dir/pids" "$dir/etcd"
	chmod 700 "$dir/etcd"
	local server="https://127.0.0.1:$apiserver_port"
	# A real node's pods reach the API server through the `kubernetes` Service, whose
	# endpoint is the advertised address: the node's, not loopback (which endpoint
	# validation rejects). Without one, webhooks are reached by URL (127.0.0.1) and
	# no endpoint is published.
	local -a cert_args=() network_args=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
	if [[ $real_node == 1 ]]; then
		local node_ip
		node_ip=$("$script_dir/node.sh" address)
		cert_args=(--advertise-ip "$node_ip" --node "${REALNODE_NAME:-real-node}")
		network_args=(--bind-address=0.0.0.0 --advertise-address="$node_ip" --endpoint-reconciler-type=lease
			--kubelet-client-certificate="$dir/pki/admin.crt" --kubelet-client-key="$dir/pki/admin.key"
			--kubelet-preferred-address-types=InternalIP --enable-aggregator-routing=true)
	fi
	"$bin/certs" --dir "$dir/pki" --server "$server" --service-ip 10.0.0.1 "${cert_args[@]}"
	cp "$dir/pki/admin.kubeconfig" "$dir/kubeconfig"

	# Any failure from here on stops what was already started.
	trap 'stop_all; exit 1' ERR

	launch etcd "$bin/etcd" --data-dir "$dir/etcd" --client-port "$etcd_port" --peer-port "$etcd_peer_port"
	wait_until etcd curl --silent --fail --max-time 5 "http://127.0.0.1:$etcd_port/health"

	local pki="$dir/pki"
	# The admission plugins upstream enables by default include
	# MutatingAdmissionWebhook and ValidatingAdmissionWebhook; CRD conversion
	# webhooks need no flag.
	launch kube-apiserver "$bin/kube-apiserver" \
		"${network_args[@]}" --secure-port="$apiserver_port" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
		--client-ca-file="$pki/ca.crt" \
		--requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
		--requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User \
		--requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$pki/front-proxy-client.crt" \
		--proxy-client-key-file="$pki/front-proxy-client.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
		--allow-privileged=true \
		--profiling=false
	wait_until kube-apiserver https_ok "$server/readyz"

	# On a real node, claims of the class `kubernetes.io/host-path` get a directory under
	# /tmp/hostpath_pv (the controller manager's test provisioner, one node only).
	local -a volume_args=()
	[[ $real_node == 0 ]] || volume_args=(--enable-hostpath-provisioner=true)
	launch kube-controller-manager "$bin/kube-controller-manager" \
		--bind-address=127.0.0.1 --secure-port="$controller_manager_port" \
		--kubeconfig="$pki/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$pki/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$pki/controller-manager.kubeconfig" \
		--leader-elect=false \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$pki/sa.key" \
		--root-ca-file="$pki/ca.crt" \
		--controllers="$controllers" \
		"${volume_args[@]}" \
		--profiling=false

	launch kube-scheduler "$bin/kube-scheduler" \
		--bind-address=127.0.0.1 --secure-port="$scheduler_port" \
		--kubeconfig="$pki/scheduler.kubeconfig" \
		--authentication-kubeconfig="$pki/scheduler.kubeconfig" \
		--authorization-kubeconfig="$pki/scheduler.kubeconfig" \
		--leader-elect=false \
		--profiling=false

	wait_until kube-controller-manager https_insecure_ok "https://127.0.0.1:$controller_manager_port/healthz"
	wait_until kube-scheduler https_insecure_ok "https://127.0.0.1:$scheduler_port/healthz"
	echo "control plane ready in $(($(now_ms) - started)) ms (logs in $dir/logs)" >&2
	if [[ $real_node == 1 ]]; then
		"$script_dir/node.sh" start "$dir"
	fi
	trap - ERR
	echo "export KUBECONFIG=$dir/kubeconfig"
}

# The three Kubernetes components shut down in parallel; etcd goes last so
# none of them loses its storage mid-shutdown.
stop_all() {
	# The control plane stops even when the node's teardown fails.
	[[ ! -d $dir/node ]] || "$script_dir/node.sh" stop "$dir" || echo "node.sh stop $dir failed" >&2
	terminate kube-scheduler kube-controller-manager kube-apiserver
	terminate etcd
}

[[ $# -eq 2 || ($# -eq 3 && $1 == start && $3 == --real-node) ]] || usage
command=$1
real_node=0
[[ ${3:-} != --real-node ]] || real_node=1
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
run_dir=$dir
case $command in
start) start ;;
stop) stop_all ;;
*) usage ;;
esac
