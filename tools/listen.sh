# tools/listen.sh: sourced by the scripts that start tally-exporter on
# 127.0.0.1:0 and must learn from its log the port the kernel chose: one
# loop, bounded in time, so that no script waits forever on an exporter
# that failed to start.

# listen_port LOG [PID]: prints the port of the exporter whose stderr
# goes to LOG once its "listening on" line is there (at most 5 s), and
# returns 0; returns 1 with nothing printed when the line does not come
# in time or when PID (if given) has exited before it came.
listen_port() {
	local port _
	for _ in $(seq 100); do
		port=$(sed -n 's|.*listening on https\{0,1\}://127.0.0.1:\([0-9]*\)/.*|\1|p' "$1")
		[ -n "$port" ] && { echo "$port"; return 0; }
		[ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}
