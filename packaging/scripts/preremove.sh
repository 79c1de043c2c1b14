#!/bin/sh
# Package pre-remove: stop the service (its data in /var/lib/paperclip and
# the paperclip user are kept).
set -e
if [ -d /run/systemd/system ]; then
	systemctl stop paperclip.service >/dev/null 2>&1 || true
	systemctl disable paperclip.service >/dev/null 2>&1 || true
fi
