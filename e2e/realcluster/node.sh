#!/usr/bin/env bash
# Starts or stops a real node for the control plane of up.sh: containerd and runc from
# Debian's packages, pod networking with the CNI bridge, host-local and loopback plugins,
# the kubelet and kube-proxy built from Kubernetes' Go modules (cmd/kubelet, cmd/kube-proxy),
# and a registry on loopback holding the test images. up.sh runs it for `start DIR
# --real-node`; it needs root, a kernel that allows network namespaces and bridges, and
# writable cgroups (v1 or v2).
#
#   node.sh start DIR   (after up.sh started DIR with --real-node) start everything, wait
#                       for the Node to be Ready, print the images' names
#   node.sh stop DIR    stop it, remove every pod's containers, network and mounts
#   node.sh address     the node's address (the source of the default route)
#
# State, sockets and logs go to DIR/node (containerd's shim sockets to /run/containerd/s).
# The Node is REALNODE_NAME (real-node); pods get addresses from REALNODE_POD_CIDR
# (10.244.0.0/24) on the bridge kruise0, reachable from the host. Images (busybox-static
# from Debian, nothing from a public registry) are served on 127.0.0.1:$REALNODE_REGISTRY_PORT
# (35100): $REGISTRY/e2e/busybox:1 and :2 (the same files, two digests), :2-again (the
# digest of :2 under another tag), the sandbox image $REGISTRY/e2e/pause:1, and a sidecar
# that serves on a port for hot upgrades (images/hotserver: e2e/hotserver:1, :2 and
# e2e/hotserver-empty:1); a second registry on the next port wants a login ($PRIVATE_USER, $PRIVATE_PASSWORD) for
# $PRIVATE_IMAGE. Stand-ins for the public images OpenKruise's e2e specs name (stand_ins
# below) are pulled under those names through containerd's mirrors for docker.io and
# registry.k8s.io. The test images, the node's name and containerd's socket (CRI_SOCK, for node agents)
# are written to DIR/node/env.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=e2e/realcluster/process-lib.sh
source "$script_dir/process-lib.sh"
bin="${REALCLUSTER_BIN:-$script_dir/bin}"
node_name="${REALNODE_NAME:-real-node}"
pod_cidr="${REALNODE_POD_CIDR:-10.244.0.0/24}"
registry_port="${REALNODE_REGISTRY_PORT:-35100}"
registry="127.0.0.1:$registry_port"
# A second registry on the next port that wants a login (the images behind pull secrets).
private_registry="127.0.0.1:$((registry_port + 1))"
private_user=kruise-e2e
private_password=kruise-e2e-password
ready_timeout_seconds="${REALCLUSTER_READY_TIMEOUT:-120}"
packages=(containerd runc containernetworking-plugins iptables busybox-static umoci skopeo docker-registry apache2-utils curl)
cni_bin=/usr/lib/cni

usage() {
	echo "usage: $0 start|stop DIR | address" >&2
	exit 2
}

now_ms() { date +%s%3N; }

# The address the node and the API server share: the source of the default route.
node_ip() {
	ip -4 route get 192.0.2.123 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}' | head -n1
}

install_packages() {
	local missing=() package
	for package in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
	done
	((${#missing[@]} == 0)) && return
	echo "installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The test images: one busybox-static layer; `busybox:2` differs from `:1` only in a
# label, so the files are the same and the digests are not.
build_images() {
	local layout=$state/images/oci rootfs=$state/images/rootfs applet
	[[ -f $layout/index.json ]] && return
	rm -rf "$state/images"
	mkdir -p "$rootfs"/{bin,etc,tmp,proc,sys,dev,root}
	cp /bin/busybox "$rootfs/bin/busybox"
	for applet in $("$rootfs/bin/busybox" --list); do
		[[ $applet == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
	echo 'root:x:0:' >"$rootfs/etc/group"
	umoci init --layout "$layout"
	umoci new --image "$layout:busybox-1"
	umoci insert --image "$layout:busybox-1" "$rootfs" /
	umoci config --image "$layout:busybox-1" --config.env PATH=/bin --config.cmd /bin/sh \
		--config.label org.kruise-rs.e2e.version=1
	umoci config --image "$layout:busybox-1" --tag busybox-2 --config.label org.kruise-rs.e2e.version=2
	umoci config --image "$layout:busybox-1" --tag pause --clear=config.cmd \
		--config.entrypoint /bin/sleep --config.entrypoint 2147483647
	# The hot-upgrade sidecar (images/hotserver): two versions that serve, and its empty image.
	local hotroot=$state/images/hotserver-rootfs
	mkdir -p "$hotroot/tmp"
	(cd "$script_dir" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$hotroot/hotserver" ./images/hotserver)
	umoci new --image "$layout:hotserver-1"
	umoci insert --image "$layout:hotserver-1" "$hotroot" /
	umoci config --image "$layout:hotserver-1" --config.entrypoint /hotserver --config.entrypoint serve \
		--config.env HOTSERVER_VERSION=1
	umoci config --image "$layout:hotserver-1" --tag hotserver-2 --clear=config.env --config.env HOTSERVER_VERSION=2
	umoci config --image "$layout:hotserver-1" --tag hotserver-empty --clear=config.env \
		--clear=config.entrypoint --config.entrypoint /hotserver --config.entrypoint idle
	build_stand_ins
}

# Stand-ins for the public images OpenKruise's e2e specs name (registry.k8s.io's
# e2e-test-images and Docker Hub's library images), served by the registry through
# containerd's mirrors: busybox with what the specs rely on. The web servers answer on port
# 80 from the document root the real image has (index.html there; a spec moves it away to
# fail a readiness probe); redis stays up; e2e busybox runs `sh`, which exits at once, as
# the real one does without a command. A shell as PID 1 so SIGTERM stops the container at
# once, as nginx and httpd stop. Each name gets a digest of its own (a label), except where
# a spec needs one digest under two tags.
build_stand_ins() {
	local layout=$state/images/oci rootfs=$state/images/rootfs webroot
	local -A docroot=([nginx]=/usr/share/nginx/html [httpd]=/usr/local/apache2/htdocs)
	for webroot in "${docroot[@]}"; do
		mkdir -p "$rootfs$webroot"
		echo '<html><body>kruise-rs e2e stand-in</body></html>' >"$rootfs$webroot/index.html"
	done
	umoci new --image "$layout:stand-in"
	umoci insert --image "$layout:stand-in" "$rootfs" /
	umoci config --image "$layout:stand-in" --config.env PATH=/bin --config.cmd /bin/sh
	local server version
	for server in nginx httpd; do
		for version in 1 2; do
			umoci config --image "$layout:stand-in" --tag "$server-$version" \
				--config.label "org.kruise-rs.e2e.stand-in=$server-$version" --clear=config.cmd \
				--config.cmd /bin/sh --config.cmd -c \
				--config.cmd "trap 'exit 0' TERM; httpd -f -p 80 -h ${docroot[$server]} & wait"
		done
	done
	umoci config --image "$layout:stand-in" --tag redis --config.label org.kruise-rs.e2e.stand-in=redis \
		--clear=config.cmd --config.cmd /bin/sh --config.cmd -c \
		--config.cmd "trap 'exit 0' TERM; httpd -f -p 6379 -h /tmp & wait"
	umoci config --image "$layout:stand-in" --tag busybox --config.label org.kruise-rs.e2e.stand-in=busybox
}

# The stand-ins' names: layout tag, then the references they are pushed as (the registry
# path behind the mirror: docker.io/library/nginx:alpine is library/nginx:alpine).
stand_ins() {
	cat <<-EOF
		nginx-1 e2e-test-images/nginx:1.14-4 library/nginx:alpine library/nginx:mainline-alpine library/nginx:latest
		nginx-2 e2e-test-images/nginx:1.15-4
		httpd-1 e2e-test-images/httpd:2.4.38-4
		httpd-2 e2e-test-images/httpd:2.4.39-4
		redis e2e-test-images/redis:5.0.5-3
		busybox e2e-test-images/busybox:1.36.1-1 library/busybox:latest library/busybox:1.32 library/busybox:1.34 library/busybox:1.35
	EOF
}

push_images() {
	local layout=$state/images/oci
	skopeo copy -q --dest-tls-verify=false "oci:$layout:busybox-1" "docker://$registry/e2e/busybox:1"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:busybox-2" "docker://$registry/e2e/busybox:2"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:busybox-2" "docker://$registry/e2e/busybox:2-again"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:pause" "docker://$registry/e2e/pause:1"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:hotserver-1" "docker://$registry/e2e/hotserver:1"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:hotserver-2" "docker://$registry/e2e/hotserver:2"
	skopeo copy -q --dest-tls-verify=false "oci:$layout:hotserver-empty" "docker://$registry/e2e/hotserver-empty:1"
	skopeo copy -q --dest-tls-verify=false --dest-creds "$private_user:$private_password" \
		"oci:$layout:busybox-1" "docker://$private_registry/e2e/private:1"
	local tag names name
	stand_ins | while read -r tag names; do
		for name in $names; do
			skopeo copy -q --dest-tls-verify=false "oci:$layout:$tag" "docker://$registry/$name"
		done
	done
}

# start_registry NAME ADDRESS [htpasswd]: a registry on ADDRESS, storing under NAME; with
# htpasswd, only the user $private_user may pull or push.
start_registry() {
	local name=$1 address=$2 auth=""
	mkdir -p "$state/$name"
	if [[ ${3:-} == htpasswd ]]; then
		htpasswd -Bbn "$private_user" "$private_password" >"$state/$name/htpasswd"
		auth="auth: {htpasswd: {realm: kruise-e2e, path: $state/$name/htpasswd}}"
	fi
	cat >"$state/$name/config.yml" <<-EOF
		version: 0.1
		log: {level: error}
		storage: {filesystem: {rootdirectory: $state/$name/data}, delete: {enabled: true}}
		http: {addr: "$address", secret: kruise-e2e}
		$auth
	EOF
	launch "$name" docker-registry serve "$state/$name/config.yml"
	# Up once /v2/ answers at all (401 from the one that wants a login).
	wait_until "$name" curl -s -o /dev/null "http://$address/v2/"
}

cri_ready() {
	printf '\0\0\0\0\0' | curl -s --max-time 2 --http2-prior-knowledge --unix-socket "$sock" \
		-H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- \
		http://localhost/runtime.v1.RuntimeService/Version 2>/dev/null | grep -q containerd
}

start_containerd() {
	local snapshotter=native probe=$state/overlay-probe
	mkdir -p "$probe"/{l,u,w,m}
	if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
		umount "$probe/m"
		snapshotter=overlayfs
	fi
	rm -rf "$probe"
	mkdir -p "$state/cni/net.d" "$state/runc"
	local address
	for address in "$registry" "$private_registry"; do
		mkdir -p "$state/certs.d/$address"
		printf 'server = "http://%s"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
			"$address" "$address" >"$state/certs.d/$address/hosts.toml"
	done
	# The public registries OpenKruise's e2e specs pull from, mirrored to the loopback
	# registry's stand-ins (this machine reaches neither).
	local upstream
	for upstream in docker.io=https://registry-1.docker.io registry.k8s.io=https://registry.k8s.io; do
		mkdir -p "$state/certs.d/${upstream%%=*}"
		printf 'server = "%s"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
			"${upstream#*=}" "$registry" >"$state/certs.d/${upstream%%=*}/hosts.toml"
	done
	# Pods on the bridge kruise0; the host is their gateway and masquerades what leaves.
	cat >"$state/cni/net.d/10-kruise-e2e.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "kruise-e2e", "plugins": [
		  {"type": "bridge", "bridge": "kruise0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
		   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]],
		            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$state/cni/ipam"}},
		  {"type": "portmap", "capabilities": {"portMappings": true}}]}
	EOF
	# restrict_oom_score_adj: a sandbox without CAP_SYS_RESOURCE cannot lower it.
	cat >"$state/containerd.toml" <<-EOF
		version = 2
		root = "$state/containerd"
		state = "$state/containerd-state"
		disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
		  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
		[grpc]
		  address = "$sock"
		[ttrpc]
		  address = "$sock.ttrpc"
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$state/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$registry/e2e/pause:1"
		  restrict_oom_score_adj = true
		  disable_apparmor = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$cni_bin"
		    conf_dir = "$state/cni/net.d"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "$snapshotter"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        Root = "$state/runc"
		        SystemdCgroup = false
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$state/certs.d"
	EOF
	launch containerd containerd --config "$state/containerd.toml"
	wait_until containerd cri_ready
}

start_kubelet() {
	local pki=$dir/pki ip=$1
	mkdir -p "$state/kubelet" "$state/pod-logs"
	# cgroup v1 is refused unless failCgroupV1 is false; oomScoreAdj 0 because lowering it is
	# not allowed in this sandbox; the eviction floors are low so a busy CI disk does not
	# evict the test pods; images are never collected during a run; a pod may set
	# net.ipv4.tcp_migrate_req (the hot-upgrade sidecar's listeners hand over connections).
	cat >"$state/kubelet.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: $ip
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: 10248
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $pki/ca.crt}
		authorization: {mode: Webhook}
		cgroupDriver: cgroupfs
		failCgroupV1: false
		failSwapOn: false
		oomScoreAdj: 0
		containerRuntimeEndpoint: unix://$sock
		podLogsDir: $state/pod-logs
		podCIDR: $pod_cidr
		serializeImagePulls: false
		evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		clusterDomain: cluster.local
		resolvConf: /etc/resolv.conf
		allowedUnsafeSysctls: [net.ipv4.tcp_migrate_req]
	EOF
	launch kubelet "$bin/kubelet" --config="$state/kubelet.yaml" \
		--kubeconfig="$pki/node.kubeconfig" --root-dir="$state/kubelet" \
		--cert-dir="$state/kubelet/pki" --hostname-override="$node_name" --node-ip="$ip"
	wait_until kubelet curl -sf http://127.0.0.1:10248/healthz
}

start_kube_proxy() {
	cat >"$state/kube-proxy.yaml" <<-EOF
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection: {kubeconfig: $dir/pki/kube-proxy.kubeconfig}
		mode: iptables
		clusterCIDR: ${pod_cidr%.*}.0/16
		hostnameOverride: $node_name
		metricsBindAddress: 127.0.0.1:10249
		healthzBindAddress: 127.0.0.1:10256
		conntrack: {maxPerCore: 0}
	EOF
	launch kube-proxy "$bin/kube-proxy" --config="$state/kube-proxy.yaml"
	wait_until kube-proxy curl -s http://127.0.0.1:10256/healthz
}

node_ready() {
	[[ $(kubectl --kubeconfig "$dir/kubeconfig" get node "$node_name" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

start() {
	[[ $(id -u) == 0 ]] || {
		echo "node.sh: needs root" >&2
		exit 1
	}
	[[ -f $dir/pki/node.kubeconfig ]] || {
		echo "node.sh: no $dir/pki/node.kubeconfig: start the control plane with up.sh start DIR --real-node" >&2
		exit 1
	}
	local started ip
	started=$(now_ms)
	ip=$(node_ip)
	install_packages
	mkdir -p "$state/logs" "$state/pids"
	trap 'stop; exit 1' ERR
	sysctl -qw net.ipv4.ip_forward=1
	build_images
	start_registry registry "$registry"
	start_registry private-registry "$private_registry" htpasswd
	push_images
	start_containerd
	start_kubelet "$ip"
	start_kube_proxy
	wait_until kubelet node_ready
	trap - ERR
	printf 'REGISTRY=%s\nIMAGE_1=%s\nIMAGE_2=%s\nIMAGE_2_AGAIN=%s\nPAUSE_IMAGE=%s\nNODE=%s\nCRI_SOCK=%s\n' \
		"$registry" "$registry/e2e/busybox:1" "$registry/e2e/busybox:2" \
		"$registry/e2e/busybox:2-again" "$registry/e2e/pause:1" "$node_name" "$sock" >"$state/env"
	printf 'HOTSERVER_1=%s\nHOTSERVER_2=%s\nHOTSERVER_EMPTY=%s\n' "$registry/e2e/hotserver:1" \
		"$registry/e2e/hotserver:2" "$registry/e2e/hotserver-empty:1" >>"$state/env"
	printf 'PRIVATE_REGISTRY=%s\nPRIVATE_IMAGE=%s\nPRIVATE_USER=%s\nPRIVATE_PASSWORD=%s\n' \
		"$private_registry" "$private_registry/e2e/private:1" "$private_user" "$private_password" >>"$state/env"
	echo "real node $node_name ($ip) ready in $(($(now_ms) - started)) ms; images in $state/env (logs in $state/logs)" >&2
}

# The iptables rules and chains kube-proxy and the kubelet (KUBE-*) and the CNI plugins
# (CNI-*: the pods' masquerading and port maps, left when containerd did not tear a
# sandbox down) made, in every table.
remove_node_rules() {
	local table rule chain
	for table in filter nat mangle; do
		iptables -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE|CNI)-' | grep -Ev '^-A (KUBE|CNI)-' |
			while read -r rule; do eval "iptables -t $table -D ${rule#-A }" 2>/dev/null || true; done || true
		for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}'); do
			iptables -t "$table" -F "$chain" 2>/dev/null || true
		done
		for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}'); do
			iptables -t "$table" -X "$chain" 2>/dev/null || true
		done
	done
}

# Every container and sandbox goes (runc unmounts and removes their cgroups), then the
# daemons, then what is left of the pods' network and mounts.
stop() {
	[[ -d $state ]] || return 0
	terminate kubelet kube-proxy
	if alive containerd; then
		local ctr="ctr -a $sock -n k8s.io" task
		for task in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s SIGKILL "$task" 2>/dev/null || true; done
		sleep 0.5
		for task in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks rm -f "$task" >/dev/null 2>&1 || true; done
	fi
	terminate containerd registry private-registry
	remove_node_rules
	ip link delete kruise0 2>/dev/null || true
	local netns
	for netns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do ip netns delete "$netns" 2>/dev/null || true; done
	awk -v d="$state/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r mount_point; do umount -l "$mount_point" 2>/dev/null || true; done
	local cgroup
	for cgroup in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[[ -d $cgroup ]] && find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	rm -f "$sock" "$sock.ttrpc"
}

[[ $# -eq 2 || ($# -eq 1 && $1 == address) ]] || usage
command=$1
[[ $command != address ]] || {
	node_ip
	exit
}
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
state=$dir/node
run_dir=$state
sock=$state/containerd.sock
case $command in
start) start ;;
stop) stop ;;
*) usage ;;
esac
