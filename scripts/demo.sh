#!/usr/bin/env bash
# Replays real sshare captures with the check command. Nothing to install:
# the captures are in testdata/.
set -u
bin=${1:-./slurmdbd_exporter}
cd "$(dirname "$0")/.."
show() {
	echo
	echo "== $1"
	echo "\$ slurmdbd_exporter check --sshare-file $2 ${*:3}"
	"$bin" check --sshare-file "$2" "${@:3}"
	echo "(exit $?: 0 within tolerance, 1 drift, 2 error)"
}
show "Real Slurm 22.05, Fair Tree, idle: every value recomputed from RawShares and RawUsage" testdata/slurm-22.05/idle-fairtree.txt
show "Real Slurm 22.05, classic (NO_FAIR_TREE), idle" testdata/slurm-22.05/idle-classic.txt
show "Real Slurm 24.11, classic while jobs ran: slurmctld's account values lag one PriorityCalcPeriod" testdata/slurm-24.11/sshare-a-l-P-classic.txt
exit 0
