#!/usr/bin/env bash
# Install Debian's Chromium for the console's browser tests (Playwright drives /usr/bin/chromium;
# its own browser download does not work here). Idempotent and quiet when Chromium is present.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "browser: /usr/bin/chromium is missing; run 'apt-get install -y chromium' as root" >&2
  exit 1
fi
echo "browser: installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
