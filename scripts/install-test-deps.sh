#!/usr/bin/env bash
# Install what the test suite needs that pip cannot:
# - PostgreSQL 15 with PostGIS 3 (the tests start their own throw-away cluster for
#   stac-fastapi-pgstac);
# - Chromium (the MCP App map is tested in headless Chromium, driven by playwright through
#   executable_path: playwright's own browser download is not used).
#
# Idempotent: does nothing when the packages are already there. Runs as root in CI;
# a developer can run it with sudo. Debian 12 ships postgresql-15-postgis-3 and chromium.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PACKAGE="postgresql-${PG_MAJOR}-postgis-3"
CONTROL="/usr/share/postgresql/${PG_MAJOR}/extension/postgis.control"
BINDIR="/usr/lib/postgresql/${PG_MAJOR}/bin"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

say() { echo "install-test-deps: $*"; }
die() { echo "install-test-deps: ERROR: $*" >&2; exit 1; }

postgis_installed() {
    dpkg -s "$PACKAGE" >/dev/null 2>&1 || return 1
    [ -f "$CONTROL" ] && [ -x "$BINDIR/initdb" ] && [ -x "$BINDIR/pg_ctl" ]
}

chromium_installed() {
    [ -x "$CHROMIUM" ]
}

if postgis_installed; then
    say "$PACKAGE already installed ($BINDIR, $CONTROL); nothing to do"
fi
if chromium_installed; then
    say "chromium already installed ($CHROMIUM); nothing to do"
fi
if postgis_installed && chromium_installed; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install PostgreSQL ${PG_MAJOR} + PostGIS 3 ($BINDIR/initdb and $CONTROL must exist) and Chromium ($CHROMIUM, or set CHROMIUM) by hand"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and sudo not found"
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

say "apt-get update"
$SUDO apt-get update -q || die "apt-get update failed"

if ! postgis_installed; then
    apt-cache show "$PACKAGE" >/dev/null 2>&1 \
        || die "$PACKAGE is not in the configured apt sources (Debian 12 has it); add a source that ships PostgreSQL ${PG_MAJOR} + PostGIS 3"
    say "apt-get install $PACKAGE"
    $SUDO apt-get install -y --no-install-recommends "$PACKAGE" || die "apt-get install $PACKAGE failed"
    postgis_installed || die "$PACKAGE installed but $BINDIR/initdb or $CONTROL is missing"
    say "done: $($BINDIR/postgres --version), PostGIS control at $CONTROL"
fi

if ! chromium_installed; then
    apt-cache show chromium >/dev/null 2>&1 \
        || die "chromium is not in the configured apt sources (Debian 12 has it)"
    say "apt-get install chromium"
    $SUDO apt-get install -y --no-install-recommends chromium || die "apt-get install chromium failed"
    chromium_installed || die "chromium installed but $CHROMIUM is missing (set CHROMIUM to its path)"
    say "done: $("$CHROMIUM" --version 2>/dev/null || echo chromium)"
fi
