#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL server.
#
# Why: the PostgreSQL timeline store and lock must be tested against a real server
# (docs/design.md, "How it is checked"), and CI runs on a fresh machine as root with
# nothing running.
# This script makes a private cluster in a temporary directory, starts it on a free
# port of 127.0.0.1, creates the database `lakeline_test`, exports
#   LAKELINE_TEST_PG_URL=postgresql://postgres@127.0.0.1:PORT/lakeline_test
# runs the given command, and always stops the server and removes the directory
# (trap), whatever the command did. Its exit status is the command's.
#
# The server refuses to run as root, so as root every server step runs as the
# `postgres` OS user (runuser); as any other user it runs as that user.
#
# Usage: scripts/with-postgres.sh COMMAND [ARGS...]
# Env:   PG_BIN   folder of initdb/pg_ctl/createdb (default: newest /usr/lib/postgresql/*/bin)
#        PG_USER  OS user that runs the server when we are root (default: postgres)
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi

if [ -z "${PG_BIN:-}" ]; then
    if [ -x /usr/lib/postgresql/15/bin/postgres ]; then
        PG_BIN=/usr/lib/postgresql/15/bin
    else
        # Any other Debian major version will do: the store uses only portable SQL.
        PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    fi
fi
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/postgres" ]; then
    echo "with-postgres: no PostgreSQL server binaries (set PG_BIN or install postgresql-15)" >&2
    exit 3
fi

PG_USER=${PG_USER:-postgres}
if [ "$(id -u)" -eq 0 ]; then
    as_server_user() { runuser -u "$PG_USER" -- "$@"; }
    owner=$PG_USER
else
    as_server_user() { "$@"; }
    owner=$(id -un)
fi

# Short path: the unix socket lives here and socket paths are limited to ~100 bytes.
PGTMP=$(mktemp -d /tmp/lakeline-pg.XXXXXX)
chmod 700 "$PGTMP"
chown "$owner" "$PGTMP"
DATA="$PGTMP/data"
LOG="$PGTMP/server.log"
started=0

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ "$started" -eq 1 ]; then
        # immediate: nothing in a throwaway cluster is worth a checkpoint.
        as_server_user "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PGTMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

as_server_user "$PG_BIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C --no-sync \
    >"$PGTMP/initdb.log" 2>&1 || { cat "$PGTMP/initdb.log" >&2; exit 4; }

free_port() {
    # Ask the kernel for a free port; fall back to a random high one. Another process may
    # take it before the server binds, so starting is retried with a fresh port.
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
        2>/dev/null || echo $((20000 + RANDOM % 40000))
}

# fsync off: the cluster is thrown away; the crash tests kill client processes, not
# the machine, so durability against power loss is not what they check.
for attempt in 1 2 3 4 5; do
    PORT=$(free_port)
    if as_server_user "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start -o \
        "-p $PORT -k $PGTMP -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200" \
        >/dev/null 2>&1; then
        started=1
        break
    fi
    echo "with-postgres: start on port $PORT failed (attempt $attempt)" >&2
done
if [ "$started" -ne 1 ]; then
    cat "$LOG" >&2 || true
    exit 5
fi

"$PG_BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres lakeline_test
export LAKELINE_TEST_PG_URL="postgresql://postgres@127.0.0.1:$PORT/lakeline_test"
echo "with-postgres: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') at $LAKELINE_TEST_PG_URL" >&2

set +e
"$@"
rc=$?
set -e
exit "$rc"
