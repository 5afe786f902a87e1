#!/bin/sh
# Installs Debian's Chromium for the browser tests of `attnlab view` (tests/test_view.py) where
# the machine allows: running as root with apt-get. Never fails: without Chromium those tests
# skip and say why. Measured on Debian 12: about 50 s (--no-install-recommends, lists present).
command -v chromium >/dev/null 2>&1 && exit 0
command -v chromium-browser >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: not installed and not root with apt-get: the browser tests will skip" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
if ! timeout 600 apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; then
    # the package lists may be missing or stale: refresh them once and try again
    timeout 300 apt-get update -q >/dev/null 2>&1
    timeout 600 apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 ||
        echo "chromium: apt-get could not install it: the browser tests will skip" >&2
fi
command -v chromium >/dev/null 2>&1 && echo "chromium: installed in $(( $(date +%s) - start )) s"
exit 0
