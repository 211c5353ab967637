#!/usr/bin/env bash
# Usage: scripts/with-servers.sh CMD [ARGS...]
#
# Runs CMD with a throw-away Redis, a 3-primary Redis Cluster and PostgreSQL on
# loopback and exports
#   MEMLAB_TEST_REDIS_URL=redis://127.0.0.1:PORT/0
#   MEMLAB_TEST_REDIS_CLUSTER_URL=redis://127.0.0.1:PORT/0     (one startup node of the cluster)
#   MEMLAB_TEST_POSTGRES_URL=postgresql+asyncpg://postgres@127.0.0.1:PORT/memlab_test
# A server whose variable the caller already set is not started. Missing
# server packages are installed with apt-get when running as root; otherwise
# that server is skipped (the tests decide whether that is a skip or a failure).
# All servers are stopped and their files removed on exit. Exit code = CMD's.
# First ports tried: MEMLAB_TEST_REDIS_PORT (6390), MEMLAB_TEST_REDIS_CLUSTER_PORT
# (6400; each cluster node also needs PORT+10000 for its bus), MEMLAB_TEST_POSTGRES_PORT (5433).
set -uo pipefail

[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }

log() { echo "with-servers: $*" >&2; }
is_root() { [ "$(id -u)" -eq 0 ]; }
now() { echo "${EPOCHREALTIME/[.,]/}"; }                      # microseconds
since() { printf '%d.%02d s' $((($(now) - $1) / 1000000)) $(((($(now) - $1) / 10000) % 100)); }

port_free() {  # nothing listening on TCP $1 and no stale PostgreSQL socket in /tmp
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && [ ! -e "/tmp/.s.PGSQL.$1" ]
}
free_port() {  # first free port at or after $1
    local p=$1
    while ! port_free "$p"; do p=$((p + 1)); done
    echo "$p"
}
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

# --- install missing servers (root only) ---------------------------------------------
want_redis=; want_cluster=; want_pg=
[ -z "${MEMLAB_TEST_REDIS_URL:-}" ] && want_redis=1
[ -z "${MEMLAB_TEST_REDIS_CLUSTER_URL:-}" ] && want_cluster=1
[ -z "${MEMLAB_TEST_POSTGRES_URL:-}" ] && want_pg=1
missing=
if [ -n "$want_redis$want_cluster" ] && ! { command -v redis-server && command -v redis-cli; } >/dev/null; then
    missing+=" redis-server"
fi
if [ -n "$want_pg" ] && { PGBIN=$(pg_bin); [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; }; then
    missing+=" postgresql"
fi
if [ -n "$missing" ]; then
    if is_root && command -v apt-get >/dev/null; then
        log "installing$missing with apt-get"
        t0=$(now)
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends redis-server postgresql; } >&2 \
            || log "apt-get failed"
        log "apt-get took $(since "$t0")"
    else
        log "missing:$missing (not root, cannot install) - running without it; tests needing it will skip"
    fi
fi

# --- cleanup ------------------------------------------------------------------------
REDIS_PID=; REDIS_PORT=; REDIS_DIR=; PG_DIR=; PG_DATA=; PGBIN=$(pg_bin)
CLUSTER_PIDS=(); CLUSTER_PORTS=(); CLUSTER_DIR=; CLUSTER_CREATE_PID=; CLUSTER_T0=
as_pg() {  # run a shell command as the postgres user (as ourselves when not root)
    if is_root; then (cd / && su postgres -s /bin/sh -c "$1"); else (cd / && sh -c "$1"); fi
}
stop_cluster_nodes() {
    local i
    if [ -n "$CLUSTER_CREATE_PID" ]; then
        kill "$CLUSTER_CREATE_PID" 2>/dev/null; wait "$CLUSTER_CREATE_PID" 2>/dev/null; CLUSTER_CREATE_PID=
    fi
    for i in "${!CLUSTER_PIDS[@]}"; do
        redis-cli -p "${CLUSTER_PORTS[$i]}" shutdown nosave >/dev/null 2>&1 || kill "${CLUSTER_PIDS[$i]}" 2>/dev/null
    done
    for i in "${!CLUSTER_PIDS[@]}"; do wait "${CLUSTER_PIDS[$i]}" 2>/dev/null; done
    CLUSTER_PIDS=(); CLUSTER_PORTS=()
}
cleanup() {
    stop_cluster_nodes
    if [ -n "$REDIS_PID" ]; then
        redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID" 2>/dev/null
        wait "$REDIS_PID" 2>/dev/null
        REDIS_PID=
    fi
    if [ -n "$PG_DATA" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
        as_pg "$(printf '%q ' "$PGBIN/pg_ctl" -D "$PG_DATA" -m fast -w stop)" >/dev/null 2>&1
    fi
    PG_DATA=
    [ -n "$REDIS_DIR" ] && rm -rf "$REDIS_DIR"; REDIS_DIR=
    [ -n "$CLUSTER_DIR" ] && rm -rf "$CLUSTER_DIR"; CLUSTER_DIR=
    [ -n "$PG_DIR" ] && rm -rf "$PG_DIR"; PG_DIR=
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- Redis --------------------------------------------------------------------------
start_redis() {
    local port=${MEMLAB_TEST_REDIS_PORT:-6390} tries i t0=$(now)
    REDIS_DIR=$(mktemp -d)
    for tries in 1 2 3 4 5; do
        port=$(free_port "$port")
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --daemonize no --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" &
        REDIS_PID=$! REDIS_PORT=$port
        for i in $(seq 50); do
            [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && {
                export MEMLAB_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
                log "redis-server up on port $port (pid $REDIS_PID, $(since "$t0"))"
                return 0
            }
            kill -0 "$REDIS_PID" 2>/dev/null || break   # died, e.g. lost a race for the port
            sleep 0.1
        done
        kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; REDIS_PID=
        port=$((port + 1))
    done
    log "redis-server did not start; see log:"; tail -5 "$REDIS_DIR/redis.log" >&2
    return 1
}

# --- Redis Cluster: three primaries, no replicas ------------------------------------
cluster_ok() {  # every node says cluster_state:ok
    local port
    for port in "${CLUSTER_PORTS[@]}"; do
        redis-cli -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
    done
}
# Two halves, so that PostgreSQL starts while the cluster forms (a node reports
# cluster_state:ok no sooner than ~2 s after it starts): launch_redis_cluster starts the
# nodes and `redis-cli --cluster create` in the background, finish_redis_cluster waits.
launch_redis_cluster() {
    local port=${MEMLAB_TEST_REDIS_CLUSTER_PORT:-6400} tries i n up nodes
    CLUSTER_T0=$(now)
    CLUSTER_DIR=$(mktemp -d)
    for tries in 1 2 3; do
        nodes=()
        for n in 1 2 3; do
            while ! { port_free "$port" && port_free $((port + 10000)); }; do port=$((port + 1)); done
            mkdir -p "$CLUSTER_DIR/$port"
            redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
                --cluster-enabled yes --cluster-config-file "$CLUSTER_DIR/$port/nodes.conf" \
                --dir "$CLUSTER_DIR/$port" --logfile "$CLUSTER_DIR/$port/redis.log" &
            CLUSTER_PIDS+=($!); CLUSTER_PORTS+=("$port"); nodes+=("127.0.0.1:$port")
            port=$((port + 1))
        done
        for i in $(seq 50); do
            up=1
            for n in "${CLUSTER_PORTS[@]}"; do
                [ "$(redis-cli -p "$n" ping 2>/dev/null)" = PONG ] || up=
            done
            [ -n "$up" ] && break
            sleep 0.05
        done
        if [ -n "$up" ]; then
            redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes \
                >"$CLUSTER_DIR/create.log" 2>&1 &
            CLUSTER_CREATE_PID=$!
            return 0
        fi
        stop_cluster_nodes   # a node lost a race for its port: try the next ports
    done
    log "redis cluster nodes did not start; see logs:"; tail -3 "$CLUSTER_DIR"/*/redis.log >&2 2>/dev/null
    return 1
}
finish_redis_cluster() {
    local i pid=$CLUSTER_CREATE_PID
    CLUSTER_CREATE_PID=
    if wait "$pid"; then
        for i in $(seq 200); do
            cluster_ok && {
                export MEMLAB_TEST_REDIS_CLUSTER_URL="redis://127.0.0.1:${CLUSTER_PORTS[0]}/0"
                log "redis cluster up on ports ${CLUSTER_PORTS[*]} ($(since "$CLUSTER_T0"))"
                return 0
            }
            sleep 0.05
        done
    fi
    log "redis cluster did not form; see logs:"; tail -3 "$CLUSTER_DIR"/create.log "$CLUSTER_DIR"/*/redis.log >&2 2>/dev/null
    stop_cluster_nodes
    return 1
}

# --- PostgreSQL ---------------------------------------------------------------------
start_postgres() {
    local port=${MEMLAB_TEST_POSTGRES_PORT:-5433} tries t0=$(now) q
    PG_DIR=$(mktemp -d)
    is_root && chown postgres: "$PG_DIR"
    q=$(printf '%q' "$PG_DIR/data")
    if ! as_pg "$PGBIN/initdb -D $q -U postgres -A trust --no-sync >$q.initdb.log 2>&1"; then
        log "initdb failed:"; tail -5 "$PG_DIR/data.initdb.log" >&2; return 1
    fi
    for tries in 1 2 3 4 5; do
        port=$(free_port "$port")
        PG_DATA=$PG_DIR/data
        if as_pg "$PGBIN/pg_ctl -D $q -l $q.log -w -t 30 \
                -o '-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off' start" >/dev/null; then
            if "$PGBIN/psql" -qX -h 127.0.0.1 -p "$port" -U postgres -d postgres \
                    -c "CREATE DATABASE memlab_test" >/dev/null; then
                export MEMLAB_TEST_POSTGRES_URL="postgresql+asyncpg://postgres@127.0.0.1:$port/memlab_test"
                # what a test needs to restart this server (outage tests): pg_ctl restart -D DATA
                export MEMLAB_TEST_POSTGRES_RESTART="$(printf '%q ' "$PGBIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA.log" -w -t 30 -m fast restart)"
                log "postgres up on port $port ($(since "$t0"))"
                return 0
            fi
            as_pg "$PGBIN/pg_ctl -D $q -m fast -w stop" >/dev/null 2>&1
        fi
        PG_DATA=
        port=$((port + 1))
    done
    log "postgres did not start; see log:"; tail -5 "$PG_DIR/data.log" >&2
    return 1
}

if [ -n "$want_redis" ]; then
    if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
        start_redis || log "continuing without Redis"
    else
        log "redis-server not available - continuing without Redis"
    fi
fi
if [ -n "$want_cluster" ]; then
    if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
        launch_redis_cluster || log "continuing without the Redis Cluster"
    else
        log "redis-server not available - continuing without the Redis Cluster"
    fi
fi
if [ -n "$want_pg" ]; then
    if [ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ]; then
        start_postgres || log "continuing without PostgreSQL"
    else
        log "PostgreSQL initdb not available - continuing without PostgreSQL"
    fi
fi
if [ -n "$CLUSTER_CREATE_PID" ]; then
    finish_redis_cluster || log "continuing without the Redis Cluster"
fi

# --- run the command ----------------------------------------------------------------
"$@"
rc=$?
exit "$rc"
