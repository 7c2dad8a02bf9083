#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the PostgreSQL response store.
#
# Sourced by scripts/test: unless $TOOLWIRE_TEST_POSTGRES already names a server, it finds
# PostgreSQL's binaries (installing Debian's postgresql when they are missing), makes a
# cluster in a temporary directory, starts it on a free port of 127.0.0.1 (as the
# `postgres` user when run as root: PostgreSQL refuses to run as root), creates a database,
# exports TOOLWIRE_TEST_POSTGRES=postgresql://… and stops the server (and removes the
# directory) when the sourcing shell exits.
#
# Run alone, it does the same around a command: scripts/postgres.sh python -m pytest -q
# tests/test_response_store.py (with no command: it starts, prints the URL, checks it
# answers, and stops).

# The directory of PostgreSQL's programs: on PATH, or where Debian keeps them.
toolwire_pg_bindir() {
    local dir
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        # (a link on PATH, such as /usr/local/bin/pg_ctl, stands for the whole directory)
        dir=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
        if [ -x "$dir/initdb" ] && [ -x "$dir/createdb" ]; then
            echo "$dir"
            return 0
        fi
    fi
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/createdb" ]; then
        echo "$dir"
        return 0
    fi
    return 1
}

# Run a PostgreSQL program as the user the server runs as.
toolwire_pg_as() {
    if [ "$(id -u)" != 0 ]; then
        "$@"
        return
    fi
    local runuser
    runuser=$(command -v runuser || ls /usr/sbin/runuser /sbin/runuser 2>/dev/null | head -n 1 || true)
    if [ -n "$runuser" ]; then
        "$runuser" -u postgres -- "$@"
    else
        su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
    fi
}

toolwire_pg_stop() {
    if [ -n "${TOOLWIRE_PG_DIR:-}" ] && [ -d "$TOOLWIRE_PG_DIR" ]; then
        toolwire_pg_as "$TOOLWIRE_PG_BIN/pg_ctl" -D "$TOOLWIRE_PG_DIR/data" -m immediate \
            stop >/dev/null 2>&1 || true
        rm -rf "$TOOLWIRE_PG_DIR"
    fi
    TOOLWIRE_PG_DIR=""
}

toolwire_pg_start() {
    if [ -n "${TOOLWIRE_TEST_POSTGRES:-}" ]; then
        return 0 # a server given by the caller
    fi
    if ! TOOLWIRE_PG_BIN=$(toolwire_pg_bindir); then
        echo "scripts/postgres.sh: installing PostgreSQL (apt-get install -y postgresql)" >&2
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                postgresql >/dev/null
        else
            sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install \
                -y -qq postgresql >/dev/null
        fi
        TOOLWIRE_PG_BIN=$(toolwire_pg_bindir) || {
            echo "scripts/postgres.sh: PostgreSQL's initdb and pg_ctl are not found" >&2
            return 1
        }
    fi
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "scripts/postgres.sh: run as root, but there is no postgres user to run" \
            "the server as" >&2
        return 1
    fi
    TOOLWIRE_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/toolwire-pg.XXXXXX")
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$TOOLWIRE_PG_DIR"
    fi
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    toolwire_pg_as "$TOOLWIRE_PG_BIN/initdb" -D "$TOOLWIRE_PG_DIR/data" -U toolwire \
        --auth=trust --encoding=UTF8 --no-sync >"$TOOLWIRE_PG_DIR/initdb.log" 2>&1 || {
        cat "$TOOLWIRE_PG_DIR/initdb.log" >&2
        toolwire_pg_stop
        return 1
    }
    # fsync off: a test server's data need not outlive a crash of the machine
    if ! toolwire_pg_as "$TOOLWIRE_PG_BIN/pg_ctl" -D "$TOOLWIRE_PG_DIR/data" -w -t 60 \
        -l "$TOOLWIRE_PG_DIR/server.log" \
        -o "-p $port -k $TOOLWIRE_PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
        start >/dev/null; then
        cat "$TOOLWIRE_PG_DIR/server.log" >&2
        toolwire_pg_stop
        return 1
    fi
    toolwire_pg_as "$TOOLWIRE_PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U toolwire \
        toolwire_test || {
        toolwire_pg_stop
        return 1
    }
    export TOOLWIRE_TEST_POSTGRES="postgresql://toolwire@127.0.0.1:$port/toolwire_test"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    trap toolwire_pg_stop EXIT
    toolwire_pg_start
    if [ "$#" -gt 0 ]; then
        "$@"
    else
        echo "$TOOLWIRE_TEST_POSTGRES"
        "$TOOLWIRE_PG_BIN/psql" "$TOOLWIRE_TEST_POSTGRES" -Atc "select 'ready'"
    fi
else
    trap toolwire_pg_stop EXIT
    toolwire_pg_start
fi
