#!/usr/bin/env bash
# Serves the bundled demo cluster (no database, no Slurm), shows a few of
# its metrics, then keeps serving until Ctrl-C. Needs nothing but bash:
# the scrape goes through bash's /dev/tcp.
set -eu
bin=${1:-./slurmdbd_exporter}
port=${DEMO_PORT:-10819}
"$bin" serve --demo --collector.extended --web.listen-address "127.0.0.1:$port" &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
scrape() {
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
	cat <&3
	exec 3<&-
}
for _ in $(seq 50); do body=$(scrape 2>/dev/null) && break; sleep 0.1; done
echo
echo "== http://127.0.0.1:$port/metrics: $(grep -c '^slurmdbd_' <<<"$body") series from a synthetic Fair Tree cluster of 400 associations"
echo
echo "-- drift: one user's usage is lost on the reported side (usage drift), Slurm's formula is intact (formula drift 0)"
grep -E '^slurmdbd_fairshare_drift_(max|beyond_tolerance_associations)\{' <<<"$body" | grep -E 'kind="usage",slurm_cluster="demo",value="(raw_usage|fairshare|rank)"|value="fairshare"'
echo
echo "-- one user association, every algorithm"
user=$(grep -m1 -oE 'slurmdbd_fairshare_rank\{[^}]*\}' <<<"$body" | grep -oE 'user="[^"]*"')
grep -E "^slurmdbd_fairshare_(factor|reported_factor|level_fs|rank|usage_billing_seconds)\{.*$user" <<<"$body"
echo
echo "-- health"
grep -E '^slurmdbd_exporter_(up|source_age_seconds)\{' <<<"$body"
echo
echo "Serving at http://127.0.0.1:$port/ until Ctrl-C."
wait $pid
