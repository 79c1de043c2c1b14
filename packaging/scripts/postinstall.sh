#!/bin/sh
# Package post-install: the paperclip system user and its data directory.
set -e
if ! getent group paperclip >/dev/null 2>&1; then
	groupadd --system paperclip
fi
if ! getent passwd paperclip >/dev/null 2>&1; then
	useradd --system --gid paperclip --home-dir /var/lib/paperclip --no-create-home \
		--shell /usr/sbin/nologin --comment "Paperclip control plane" paperclip
fi
install -d -o paperclip -g paperclip -m 0700 /var/lib/paperclip
chown root:paperclip /etc/paperclip/paperclip.env
chmod 0640 /etc/paperclip/paperclip.env
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
