#!/bin/sh
# slurmdbd-exporter postinstall. deb: postinst configure [old version];
# rpm: %post 1 (install) or 2 (upgrade).
set -e

user=slurmdbd_exporter

case "$1" in
abort-*) exit 0 ;;
esac

# The service's own system user and group; kept on removal, as Debian and
# Fedora do with system users (files may still belong to them).
if ! getent group "$user" >/dev/null; then
	groupadd --system "$user"
fi
if ! getent passwd "$user" >/dev/null; then
	useradd --system --gid "$user" --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --comment "slurmdbd_exporter" "$user"
fi

# The DSN directory is read through the group, which exists only now: the
# package itself installs it root:root.
chown root:"$user" /etc/slurmdbd_exporter
chmod 0750 /etc/slurmdbd_exporter

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# After an upgrade a running exporter moves to the new binary; a stopped
	# one stays stopped.
	systemctl try-restart slurmdbd_exporter.service || true
fi

first=
case "$1" in
configure) [ -n "$2" ] || first=1 ;;
1) first=1 ;;
esac
if [ -n "$first" ]; then
	cat <<'MSG'
slurmdbd_exporter: installed, but not enabled or started: it needs the database DSN first.
  1. A SELECT-only database user: /usr/share/slurmdbd_exporter/grant.sql
  2. The DSN (user:password@tcp(host:3306)/slurm_acct_db) in /etc/slurmdbd_exporter/dsn:
       chown root:slurmdbd_exporter /etc/slurmdbd_exporter/dsn && chmod 0640 /etc/slurmdbd_exporter/dsn
  3. Flags: ARGS in /etc/default/slurmdbd_exporter
  4. systemctl enable --now slurmdbd_exporter
MSG
fi
exit 0
