# The checks' library of smoke.sh and nodes-smoke.sh (sourced, not run): pass/fail
# counters and the polling of a check with a deadline (`timeout_seconds`, set by the
# script). The script prints "$passed passed, $failed failed" at the end.
passed=0
failed=0

pass() {
	passed=$((passed + 1))
	echo "ok   $1"
}

fail() {
	failed=$((failed + 1))
	echo "FAIL $1"
	[[ -n ${2:-} ]] && printf '     %s\n' "$2"
}

# eventually DESCRIPTION COMMAND...: passes once COMMAND succeeds, fails after
# the timeout with COMMAND's last output.
eventually() {
	local description=$1
	shift
	local deadline=$((SECONDS + timeout_seconds)) output
	while true; do
		if output=$("$@" 2>&1); then
			pass "$description"
			return 0
		fi
		if ((SECONDS >= deadline)); then
			fail "$description" "$output"
			return 1
		fi
		sleep 0.5
	done
}

# equals EXPECTED COMMAND...: succeeds when COMMAND prints exactly EXPECTED.
equals() {
	local expected=$1 actual
	shift
	actual=$("$@") || return 1
	if [[ $actual != "$expected" ]]; then
		echo "expected '$expected', got '$actual'"
		return 1
	fi
}
