#!/usr/bin/env bash
# Installs Debian packages (apt-get install -y --no-install-recommends PKG…) without starting the
# services they ship: redis-server's and prometheus' packages start a daemon on their default
# port as they install. While apt runs, a policy-rc.d that answers 101 ("action forbidden")
# is in place, which invoke-rc.d and deb-systemd-invoke honour, so nothing starts and nothing
# has to be stopped afterwards (stopping by name would stop other people's servers too).
# A policy-rc.d that was there before is put back as it was.
#
#   SUDO=sudo bash scripts/apt-install.sh redis-server redis-tools
#   POLICY_RC_D  where invoke-rc.d looks (default /usr/sbin/policy-rc.d; the tests move it)
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 PACKAGE…" >&2; exit 2; }
policy=${POLICY_RC_D:-/usr/sbin/policy-rc.d}
sudo=${SUDO:-}
saved=""
if [ -e "$policy" ]; then
  saved="$policy.apt-install-saved.$$"
  $sudo mv "$policy" "$saved"
fi
restore() {
  $sudo rm -f "$policy"
  if [ -n "$saved" ]; then $sudo mv "$saved" "$policy"; fi
}
trap restore EXIT
printf '#!/bin/sh\n# scripts/apt-install.sh: no service starts while it installs\nexit 101\n' | $sudo tee "$policy" >/dev/null
$sudo chmod 755 "$policy"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
