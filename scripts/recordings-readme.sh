#!/bin/sh
# Writes testdata/recordings/README.md from the captures' moment.json
# files: which release made each run, when and on what machine (make
# record runs it after recording).
set -eu
cd "$(dirname "$0")/../testdata/recordings"
{
	echo "# Recordings of real Slurm"
	echo
	echo "Written by \`make record\` (the live tests that record, on each release in turn; docs/testing.md)"
	echo "and replayed by \`make test\` (\`TestHistoryReplay\`, \`TestRollupReplay\`, \`TestForecastReplay\`,"
	echo "\`TestSprioReplay\`, \`TestGoldenDatabaseReplay\`, \`TestSiteShapedReplay\`, \`TestUpgradeReplay\`). Every file is real output of"
	echo "real Slurm and MariaDB; none is written by hand. This list is made by \`scripts/recordings-readme.sh\`."
	echo "Releases that no Debian suite packages (\`slurm X\` below) ran from builds of SchedMD's release tags"
	echo "(\`SLURMDBD_EXPORTER_SLURM_BUILDS\`, docs/testing.md); Debian's (\`slurm-wlm X\`) from its packages."
	echo "The builds: the tag \`slurm-X-Y-Z-1\` of each \`slurm X.Y.Z\` below, configured with multiple-slurmd"
	echo "support (the site-shaped cluster's two nodes) and without slurmrestd, X11, sview or the optional"
	echo "plugins (hdf5, rrdtool, pmix, ucx, nvml, rsmi, hwloc, lua), against Debian 12's libmunge and libmariadb."
	echo "This repository does not build Slurm."
	echo
	echo "| run | captures | Slurm | first capture (UTC) | machine |"
	echo "|---|---|---|---|---|"
	for run in $(find . -name moment.json | xargs -n1 dirname | xargs -n1 dirname | sort -u); do
		n=$(find "$run" -name moment.json | wc -l)
		first=$(find "$run" -name moment.json | sort | head -1)
		release=$(sed -n 's/.*"release": "\(.*\)".*/\1/p' "$first")
		at=$(tr -d ' \n' < "$first" | sed 's/.*"read":\[\([0-9]*\).*/\1/')
		machine=$(cat "$run/machine" 2>/dev/null || echo "not noted")
		echo "| \`${run#./}\` | $n | $release | $(date -u -d "@$at" '+%Y-%m-%d %H:%M') | $machine |"
	done
} > README.md
