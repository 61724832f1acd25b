#!/usr/bin/env bash
# netns_pd.sh: run prefill, decode and router as three "hosts" in Linux
# network namespaces joined by veth pairs on a bridge, so that the HTTP
# requests and the KV transfer (gRPC, prefill bootstrap port) cross real
# network interfaces; then check answers through the router from the root
# namespace (the client host).
#
#   sudo tools/netns_pd.sh            # build, run, check, tear down
#   KEEP=1 sudo tools/netns_pd.sh     # leave everything running
#
# Needs root, iproute2 and curl. Topology (10.77.0.0/24 on bridge dsv4br0):
#   root ns (client) 10.77.0.1 -- dsv4-prefill 10.77.0.2 (:30001, bootstrap :8998)
#                              -- dsv4-decode  10.77.0.3 (:30002)
#                              -- dsv4-router  10.77.0.4 (:8000)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(mktemp -d)
NS=(dsv4-prefill dsv4-decode dsv4-router)
IPS=(10.77.0.2 10.77.0.3 10.77.0.4)
PIDS=()

cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for i in 0 1 2; do ip netns del "${NS[$i]}" 2>/dev/null || true; ip link del "veth$i-br" 2>/dev/null || true; done
	ip link del dsv4br0 2>/dev/null || true
	rm -rf "$BIN"
}
if [ -z "${KEEP:-}" ]; then trap cleanup EXIT; fi

go build -o "$BIN/" ./examples/pd ./examples/router

ip link add dsv4br0 type bridge
ip addr add 10.77.0.1/24 dev dsv4br0
ip link set dsv4br0 up
for i in 0 1 2; do
	ns=${NS[$i]}
	ip netns add "$ns"
	ip link add "veth$i-br" type veth peer name "veth$i"
	ip link set "veth$i-br" master dsv4br0 up
	ip link set "veth$i" netns "$ns"
	ip -n "$ns" addr add "${IPS[$i]}/24" dev "veth$i"
	ip -n "$ns" link set "veth$i" up
	ip -n "$ns" link set lo up
done

LOG=${LOG_DIR:-$BIN}
ip netns exec dsv4-prefill "$BIN/pd" --disaggregation-mode prefill --host 10.77.0.2 --port 30001 \
	--disaggregation-bootstrap-port 8998 >"$LOG/prefill.log" 2>&1 &
PIDS+=($!)
ip netns exec dsv4-decode "$BIN/pd" --disaggregation-mode decode --host 10.77.0.3 --port 30002 --allowed-bootstrap-hosts 10.77.0.2 >"$LOG/decode.log" 2>&1 &
PIDS+=($!)
wait_http() { for _ in $(seq 100); do curl -sf "$1/health" >/dev/null && return 0; sleep 0.2; done; echo "no answer from $1" >&2; return 1; }
wait_http http://10.77.0.2:30001
wait_http http://10.77.0.3:30002
ip netns exec dsv4-router "$BIN/router" --host 10.77.0.4 --port 8000 --pd-disaggregation \
	--prefill http://10.77.0.2:30001 8998 --decode http://10.77.0.3:30002 >"$LOG/router.log" 2>&1 &
PIDS+=($!)
wait_http http://10.77.0.4:8000

ask() {
	curl -sf http://10.77.0.4:8000/v1/chat/completions -H 'Content-Type: application/json' -d "$1"
}
Q='{"model":"dsv4-tiny","messages":[{"role":"user","content":"What is 17*23? Number only."}],"temperature":0,"max_tokens":32}'
out=$(ask "$Q")
echo "non-streaming: $out"
echo "$out" | grep -q '"content":"391"' || { echo "FAIL: expected 391" >&2; exit 1; }
sout=$(ask "${Q%\}},\"stream\":true}")
echo "$sout" | grep -q 'data: \[DONE\]' || { echo "FAIL: stream did not finish" >&2; exit 1; }
echo "$sout" | grep -q '"content":"391"' || { echo "FAIL: streamed answer" >&2; exit 1; }
bytes=$(curl -sf http://10.77.0.2:30001/metrics | awk '/^dsv4_disagg_transfer_bytes_total/ {print $2}')
echo "KV bytes sent by prefill over veth: $bytes"
[ "${bytes%%.*}" != "0" ] || { echo "FAIL: no KV transfer counted" >&2; exit 1; }
echo "OK: PD across three network namespaces"
