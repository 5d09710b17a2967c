# The process handling up.sh and node.sh share (sourced, not run). Every process of a run
# logs to $run_dir/logs/NAME.log and has its pid in $run_dir/pids/NAME.pid; waits give up
# after $ready_timeout_seconds.
#   launch NAME COMMAND...     start COMMAND in the background, in a session of its own
#                              (it outlives the script that started it)
#   alive NAME                 it still runs
#   wait_until NAME CHECK...   poll CHECK until it succeeds; fail when NAME exits first
#                              (with the end of its log) or the deadline passes
#   terminate NAME...          SIGTERM to all at once, up to 20 s, then SIGKILL

launch() {
	local name=$1
	shift
	setsid "$@" </dev/null >"$run_dir/logs/$name.log" 2>&1 &
	echo $! >"$run_dir/pids/$name.pid"
}

alive() {
	local pid_file="$run_dir/pids/$1.pid"
	[[ -f $pid_file ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

wait_until() {
	local name=$1
	shift
	local deadline=$((SECONDS + ready_timeout_seconds))
	until "$@" >/dev/null 2>&1; do
		if ! alive "$name"; then
			echo "$name exited while starting; last lines of $run_dir/logs/$name.log:" >&2
			tail -n 30 "$run_dir/logs/$name.log" >&2
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "$name not ready within ${ready_timeout_seconds}s; see $run_dir/logs/$name.log" >&2
			return 1
		fi
		sleep 0.2
	done
}

terminate() {
	local name pid deadline
	local -a pids=()
	for name in "$@"; do
		[[ -f $run_dir/pids/$name.pid ]] || continue
		pid=$(cat "$run_dir/pids/$name.pid")
		rm -f "$run_dir/pids/$name.pid"
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	deadline=$((SECONDS + 20))
	for pid in "${pids[@]}"; do
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "pid $pid ignored SIGTERM for 20s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}
