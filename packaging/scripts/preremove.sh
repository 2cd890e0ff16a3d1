#!/bin/sh
# slurmdbd-exporter preremove. deb: prerm remove|upgrade|deconfigure|
# failed-upgrade; rpm: %preun 0 (erase) or 1 (upgrade). An upgrade leaves
# the service running: postinstall restarts it on the new binary.
set -e

case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl stop slurmdbd_exporter.service || true
	fi
	# An enabled unit would leave its symlinks behind (RPM's %systemd_preun
	# disables it too); works without a running systemd.
	systemctl --no-reload disable slurmdbd_exporter.service >/dev/null 2>&1 || true
	;;
esac
exit 0
