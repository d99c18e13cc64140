# tools/listen.sh: sourced by the scripts that start a server (tally-exporter,
# Prometheus) on 127.0.0.1:0 and must learn from its log the port the
# kernel chose: one loop, bounded in time, so that no script waits
# forever on a server that failed to start.  A port chosen beforehand
# (bound, freed, then given to the server) could be taken by another
# program in between, such as a second test run on the same machine.

# log_port LOG PID TRIES SED: prints what the sed expression SED prints
# of LOG once it prints something (tried TRIES times, 50 ms apart), and
# returns 0; returns 1 with nothing printed when it does not come in time
# or when PID (if not empty) has exited before it came.
log_port() {
	local port _
	for _ in $(seq "$3"); do
		port=$(sed -n "$4" "$1" | head -1)
		[ -n "$port" ] && { echo "$port"; return 0; }
		[ -n "$2" ] && ! kill -0 "$2" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}

# listen_port LOG [PID]: the port of the exporter whose stderr goes to
# LOG, from its "listening on" line (at most 5 s).
listen_port() {
	log_port "$1" "${2:-}" 100 \
		's|.*listening on https\{0,1\}://127.0.0.1:\([0-9]*\)/.*|\1|p'
}

# prometheus_port LOG [PID]: the port of the Prometheus whose output goes
# to LOG, from its line msg="Listening on" address=127.0.0.1:PORT (at most
# 30 s: it opens its storage first).
prometheus_port() {
	log_port "$1" "${2:-}" 600 \
		's|.*msg="Listening on" address=127\.0\.0\.1:\([0-9]*\).*|\1|p'
}
