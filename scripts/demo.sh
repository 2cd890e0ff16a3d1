#!/usr/bin/env bash
# Serves the bundled demo cluster (no database, no Slurm: serve --demo runs
# the exporter's refresh loop over a simulated cluster), shows a few of its
# metrics and what to look at, then keeps serving until Ctrl-C. Needs
# nothing but bash: the scrape goes through bash's /dev/tcp.
set -eu
bin=${1:-./slurmdbd_exporter}
port=${DEMO_PORT:-10819}
"$bin" serve --demo --web.listen-address "127.0.0.1:$port" &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
scrape() {
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
	cat <&3
	exec 3<&-
}
ready() {
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET /-/ready HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
	head -1 <&3 | grep -q ' 200 '
	exec 3<&-
}
for _ in $(seq 100); do ready 2>/dev/null && break; sleep 0.1; done
# ready comes with the first refresh; the simulated slurmctld's first
# report is compared a moment later (on a loaded host, after that scrape:
# no drift to show, and grep's no-match ended the script under set -e)
for _ in $(seq 100); do
	body=$(scrape) && grep -q '^slurmdbd_fairshare_drift_max{' <<<"$body" && break
	sleep 0.1
done
echo
echo "== http://127.0.0.1:$port/metrics: $(grep -c '^slurmdbd_' <<<"$body") series from a simulated Fair Tree cluster of 400 associations"
echo "   (jobs start and end, a decay pass every 5 simulated minutes, hourly rollups; its clock runs 10 times the wall's)"
echo
echo "-- drift: the database's rebuild against what the simulated slurmctld reports (healthy: nothing beyond tolerance)"
grep -E '^slurmdbd_fairshare_drift_(max|bound|beyond_tolerance_associations)\{' <<<"$body" | grep -E 'value="(raw_usage|fairshare)"'
grep -E '^slurmdbd_fairshare_(decay_phase_uncertainty_seconds|rollup_lag_seconds)\{' <<<"$body"
echo
echo "-- one user association"
label=$(grep -m1 -oE 'slurmdbd_fairshare_rank\{[^}]*\}' <<<"$body" | grep -oE 'user="[^"]*"')
user=$(sed -E 's/user="(.*)"/\1/' <<<"$label")
grep -E "^slurmdbd_fairshare_(factor|reported_factor|rank|usage_billing_seconds|reported_usage_billing_seconds|recovery_seconds)\{.*$label" <<<"$body"
echo
echo "-- health"
grep -E '^slurmdbd_exporter_(up|source_age_seconds)\{' <<<"$body"
cat <<MSG

What to look at:
  * Scrape it with Prometheus and load dashboards/prometheus/rules.yml; import dashboards/*.json
    into Grafana (docs/dashboards.md says what each shows after ten minutes).
  * Faults come in turn every 15 minutes, each for 40 (--demo.fault-interval, --demo.fault-duration):
    lost usage (UsageLost at once, UsageDrift after 30m), a PriorityFlags change slurmctld runs with
    (FairshareDriftHigh), a stalled rollup (RollupStalled). The exporter's log says when each starts and ends.
  * $bin explain --demo --user $user --forecast   (why is this user's priority where it is?)
  * docs/alerts.md has each alert's runbook.

Serving at http://127.0.0.1:$port/ until Ctrl-C.
MSG
wait $pid
