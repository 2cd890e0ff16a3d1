#!/bin/sh
# slurmdbd-exporter postremove. deb: postrm remove|purge|upgrade|...;
# rpm: %postun 0 (erase) or 1 (upgrade). The user, the group and what the
# administrator put in /etc/slurmdbd_exporter (the DSN) are left in place.
set -e

case "$1" in
remove | purge | 0)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
	fi
	;;
esac
exit 0
