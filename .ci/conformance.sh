#!/usr/bin/env bash
# Run the official MCP conformance suite against Switchboard: its client scenarios against the
# adapter (Switchboard's upstream side), its server scenarios against `switchboard serve` (the
# front door, with the conformance fixture server behind it).
#
#   .ci/conformance.sh [REVISION...]      (default: 2025-11-25 2026-07-28)
#
# Needs target/release/{switchboard-conformance,switchboard,switchboard-conformance-everything}
# (cargo build --release --workspace --bins), npm,
# and the loopback guard .ci/loopback-guard.mjs (preloaded into the harness). The harness and the
# Node 22 it needs are pinned in .ci/package.json / package-lock.json and installed with
# `npm ci` into .ci/work/harness (gitignored). Results: .ci/work/conformance-<REVISION>/.
#
# A revision passes when
#   1. the harness exits 0: no scored scenario has a FAILURE (there is no expected-failures
#      file: nothing is waived), and
#   2. .ci/conformance-check.mjs finds every scenario's expected checks SUCCESSful, auth and
#      extension scenarios included, and no FAILURE or WARNING anywhere (the harness alone
#      ignores WARNINGs and extensions, and would score a do-nothing run of some scenarios as
#      passing).
# The server side runs `conformance server --requirements REVISION` against Switchboard's /mcp,
# with one upstream added as its only server (empty prefix, so the names are the suite's own):
# switchboard-conformance-everything speaking every revision (pinned to its stateless face, so
# legacy scenarios cross the eras) for both revisions; the same fixture limited to legacy sessions for 2025-11-25; and
# tests/npm/conformance-upstream.mjs, a server on the official TypeScript SDK (sessions), for
# 2025-11-25 (it needs `npm ci --prefix tests/npm`, which scripts/test runs first). The same
# TypeScript SDK server with --dual-era also has a stateless 2026-07-28 face that offers less than
# its sessions (the reference server's shape): there, both revisions' scenarios run at once,
# directly against the server and through Switchboard with default settings, and
# conformance-compare.mjs requires every scenario that passes directly to pass through
# Switchboard (each client era is served over a link of its own era). conformance-check.mjs
# (server) holds every scenario of the other runs to the checks listed in
# conformance-expected-server.mjs, with no FAILURE or WARNING, the tasks extension's scenarios
# included (Switchboard runs the tasks); only the one the suite itself skips is reported and not
# held.
# Everything always runs; the last lines are one `N passed, M failed` line per run, and the
# exit status is 1 if any run failed.
set -euo pipefail

ROOT="$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)"
CI_DIR="$ROOT/.ci"
WORK="$CI_DIR/work"
HARNESS_DIR="$WORK/harness"
ADAPTER="$ROOT/target/release/switchboard-conformance"
SWITCHBOARD="$ROOT/target/release/switchboard"
FIXTURE="$ROOT/target/release/switchboard-conformance-everything"
GUARD="$CI_DIR/loopback-guard.mjs"
# The harness's own scenario timeout is 30 s and scenarios run in parallel; a whole run takes
# well under a minute. This outer bound only stops a wedged harness from eating the CI budget.
RUN_LIMIT=600

die() { echo "conformance: ERROR: $*" >&2; exit 1; }

if [ "$#" -gt 0 ]; then REVISIONS=("$@"); else REVISIONS=(2025-11-25 2026-07-28); fi

# --- preconditions -----------------------------------------------------------------------------
[ -f "$GUARD" ] || die "loopback guard not found at $GUARD; the harness must not run without it, \
because no test may send traffic off this machine."
for bin in "$ADAPTER" "$SWITCHBOARD" "$FIXTURE"; do
  [ -x "$bin" ] || die "binary $bin is missing. Build it first: cargo build --release --workspace --bins"
done
# The harness runs `<command> <url>` through /bin/sh and NODE_OPTIONS is split on spaces, so
# these paths must not contain spaces or shell metacharacters.
for p in "$ADAPTER" "$GUARD"; do
  [[ "$p" =~ ^[A-Za-z0-9_./+-]+$ ]] || die "path '$p' has characters unsafe for the harness command line; move the checkout"
done
command -v npm >/dev/null || die "npm is not on PATH; it is needed to install the pinned harness"
TS_UPSTREAM="$ROOT/tests/npm/conformance-upstream.mjs"
[ -d "$ROOT/tests/npm/node_modules/@modelcontextprotocol/sdk" ] || die "the TypeScript SDK upstream \
needs tests/npm installed: npm ci --prefix tests/npm (scripts/test does this first)"

# --- install the pinned harness and Node 22 ----------------------------------------------------
# Reuse an earlier install only when it was made from the very same lock file (local reruns);
# CI starts from a fresh clone and always installs.
NODE22="$HARNESS_DIR/node_modules/node/bin/node"
HARNESS_JS="$HARNESS_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if cmp -s "$CI_DIR/package-lock.json" "$HARNESS_DIR/package-lock.json" \
   && cmp -s "$CI_DIR/package.json" "$HARNESS_DIR/package.json" \
   && [ -x "$NODE22" ] && [ -f "$HARNESS_JS" ]; then
  echo "conformance: reusing harness installed in $HARNESS_DIR (same lock file)"
else
  echo "conformance: installing pinned harness + Node 22 into $HARNESS_DIR (npm ci)"
  rm -rf "$HARNESS_DIR"
  mkdir -p "$HARNESS_DIR"
  cp "$CI_DIR/package.json" "$CI_DIR/package-lock.json" "$HARNESS_DIR/"
  # The `node` package downloads its platform binary in a preinstall script (allowed in
  # package.json's allowScripts), so scripts must not be disabled here.
  (cd "$HARNESS_DIR" && npm ci --no-audit --no-fund --ignore-scripts=false) \
    || die "npm ci in $HARNESS_DIR failed (see npm's output above); the npm registry must be reachable"
fi
NODE_VERSION="$("$NODE22" --version 2>&1)" || die "pinned Node binary $NODE22 does not run: $NODE_VERSION"
[[ "$NODE_VERSION" == v22.* ]] || die "pinned Node is $NODE_VERSION, expected v22.x (the harness needs Node >= 22)"
[ -f "$HARNESS_JS" ] || die "harness entry point $HARNESS_JS is missing after npm ci"
echo "conformance: harness @modelcontextprotocol/conformance@$("$NODE22" -p "require('$HARNESS_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version") on Node $NODE_VERSION"

# harness <limit in seconds> <harness arguments...>: one run of the harness, with Node 22 first
# on PATH for the harness only and the guard preload, which refuses non-loopback fetch/DNS inside
# it; no stdin, and stopped (then killed) if it outlives the limit.
harness() {
  local limit="$1"; shift
  PATH="$(dirname "$NODE22"):$PATH" NODE_OPTIONS="--import=$GUARD" \
    timeout --kill-after=30 "$limit" "$NODE22" "$HARNESS_JS" "$@" </dev/null
}

# --- run each revision -------------------------------------------------------------------------
rm -f "$WORK/conformance-summary.txt"  # scripts/test re-prints this file last; never a stale one
rm -rf "$WORK/conformance-extra"
SUMMARY=()
FAILED_REVS=()
for rev in "${REVISIONS[@]}"; do
  out="$WORK/conformance-$rev"
  rm -rf "$out" "$out.log"
  mkdir -p "$out"
  echo
  echo "=== conformance client --requirements $rev (log: $out.log) ==="
  # `exec` makes the adapter replace the /bin/sh the harness
  # spawns, so the harness's timeout kill reaches the adapter itself instead of leaving it
  # orphaned, and the exit status the harness sees is the adapter's own.
  set +e
  harness "$RUN_LIMIT" client --command "exec $ADAPTER" --requirements "$rev" -o "$out" 2>&1 \
    | tee "$out.log"
  harness_rc=${PIPESTATUS[0]}
  set -e
  case "$harness_rc" in
    0) echo "conformance $rev: harness baseline check passed" ;;
    124|137) echo "conformance $rev: FAILED: the harness did not finish within ${RUN_LIMIT}s" ;;
    *) echo "conformance $rev: FAILED: harness exited $harness_rc (a scored scenario failed; see \
the report above)" ;;
  esac

  echo "--- vacuous-pass guard for $rev (every scenario, extensions included) ---"
  set +e
  check_out="$("$NODE22" "$CI_DIR/conformance-check.mjs" "$out" "$rev" 2>&1)"
  check_rc=$?
  set -e
  printf '%s\n' "$check_out"
  [ "$check_rc" -eq 0 ] || echo "conformance $rev: FAILED: vacuous-pass guard (problems listed above)"

  last="$(printf '%s\n' "$check_out" | tail -n 1)"
  if [[ ! "$last" =~ ^conformance-$rev:\ [0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
    # The guard itself broke (e.g. unreadable output dir); count that as one failure.
    echo "conformance $rev: FAILED: the guard script did not produce its summary line"
    last="conformance-$rev: 0 passed, 1 failed"
    check_rc=1
  fi
  SUMMARY+=("$last")
  if [ "$harness_rc" -ne 0 ] || [ "$check_rc" -ne 0 ]; then FAILED_REVS+=("$rev"); fi
done

# --- scenarios outside the requirement sets -----------------------------------------------------
# The 2025-03-26 authorization fallbacks (authorization-server metadata at the server's origin,
# then the default /authorize, /token, /register endpoints) are in no frozen set, but Switchboard
# supports that revision. A single-scenario run fails on any FAILURE or WARNING, and on a
# non-zero exit of the adapter.
EXTRA_SCENARIOS=(auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback)
for scenario in "${EXTRA_SCENARIOS[@]}"; do
  out="$WORK/conformance-extra"
  mkdir -p "$out"
  echo
  echo "=== conformance client --scenario $scenario ==="
  set +e
  harness 120 client --command "exec $ADAPTER" --scenario "$scenario" -o "$out" 2>&1 | tail -n 3
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -eq 0 ]; then
    SUMMARY+=("conformance-$scenario: passed")
  else
    echo "conformance $scenario: FAILED (harness exited $rc; results under $out)"
    SUMMARY+=("conformance-$scenario: FAILED")
    FAILED_REVS+=("$scenario")
  fi
done

# --- server side: Switchboard's front door ------------------------------------------------------
# Background processes of this section, stopped on exit whatever happens.
PIDS=()
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Each is gone before the next configuration starts (or the script ends).
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
trap stop_all EXIT
free_port() {
  "$NODE22" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
# wait_connected <status url>: until the one server reports `connected` (bounded: 30 s).
wait_connected() {
  "$NODE22" -e '
    const url = process.argv[1];
    const deadline = Date.now() + 30000;
    (async () => {
      let last = "no answer";
      while (Date.now() < deadline) {
        try {
          const status = await (await fetch(url)).json();
          const state = status.servers?.[0]?.state;
          if (state === "connected") return;
          last = JSON.stringify(status.servers?.[0] ?? status);
        } catch (e) { last = String(e); }
        await new Promise((r) => setTimeout(r, 200));
      }
      console.error(`not connected within 30 s: ${last}`);
      process.exit(1);
    })();' "$1"
}

# start_upstream <name> <port>: the upstream of one server-side configuration, in the background.
# Run as `start_upstream ... &`, the function is a subshell of its own: each case execs, so the
# pid kept in PIDS is the upstream's itself and stop_all stops it (a subshell that forked the
# upstream would die alone and leave it running).
start_upstream() {
  case "$1" in
    all-revisions) exec "$FIXTURE" --port "$2" ;;
    legacy-only) exec "$FIXTURE" --port "$2" --legacy-only ;;
    ts-sdk) exec node "$TS_UPSTREAM" --port "$2" ;;
    ts-sdk-dual-era) exec node "$TS_UPSTREAM" --port "$2" --dual-era ;;
    *) die "unknown upstream configuration $1" ;;
  esac
}
# upstream name:revisions the suite tests through it (those asked for on the command line).
SERVER_CONFIGS=("all-revisions:2025-11-25 2026-07-28" "legacy-only:2025-11-25" "ts-sdk:2025-11-25"
  "ts-sdk-dual-era:2025-11-25 2026-07-28")
# Configurations held by comparison with the upstream alone rather than by the expected checks.
COMPARED_CONFIGS=" ts-sdk-dual-era "

# compare_eras <upstream> <fixture port> <serve port> <revisions...>: every revision's scenarios
# directly against the upstream, then through Switchboard, all revisions at once each time;
# conformance-compare.mjs holds that nothing passing directly fails through Switchboard.
compare_eras() {
  local upstream="$1" fixture_port="$2" serve_port="$3"; shift 3
  local rev where port pids=()
  for where in direct through; do
    port="$fixture_port"; [ "$where" = through ] && port="$serve_port"
    pids=()
    for rev in "$@"; do
      local out="$WORK/conformance-server-$upstream-$rev-$where"
      rm -rf "$out" "$out.log"; mkdir -p "$out"
      echo "=== conformance server --requirements $rev, $where (upstream: $upstream; log: $out.log) ==="
      harness "$RUN_LIMIT" server --url "http://127.0.0.1:$port/mcp" --requirements "$rev" -o "$out" \
        >"$out.log" 2>&1 &
      pids+=($!)
    done
    # The harness exits non-zero when a scenario fails, which the upstream's own face may do:
    # the comparison below is what holds this configuration.
    for pid in "${pids[@]}"; do wait "$pid" || true; done
  done
  for rev in "$@"; do
    local base="$WORK/conformance-server-$upstream-$rev"
    set +e
    local compare_out
    compare_out="$("$NODE22" "$CI_DIR/conformance-compare.mjs" "$base-direct" "$base-through" "$upstream-$rev" 2>&1)"
    local compare_rc=$?
    set -e
    printf '%s\n' "$compare_out"
    local last
    last="$(printf '%s\n' "$compare_out" | tail -n 1)"
    if [[ ! "$last" =~ ^conformance-compare-$upstream-$rev:\ [0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
      echo "conformance compare $upstream $rev: FAILED: the comparison did not produce its summary line"
      last="conformance-compare-$upstream-$rev: 0 passed, 1 failed"
      compare_rc=1
    fi
    SUMMARY+=("$last (scenarios passing directly that pass through Switchboard)")
    [ "$compare_rc" -eq 0 ] || FAILED_REVS+=("compare-$rev-$upstream")
  done
}
USED_PORTS=()
for config in "${SERVER_CONFIGS[@]}"; do
  IFS=: read -r upstream server_revs <<<"$config"
  data="$WORK/server-data-$upstream"
  rm -rf "$data"
  fixture_port="$(free_port)"
  serve_port="$(free_port)"
  USED_PORTS+=("$fixture_port" "$serve_port")
  echo
  echo "=== switchboard serve on 127.0.0.1:$serve_port, upstream: $upstream ==="
  start_upstream "$upstream" "$fixture_port" 2>"$WORK/server-fixture-$upstream.log" &
  PIDS+=($!)
  # The fixture speaking every revision is pinned to its stateless face, so legacy scenarios
  # cross the eras (sampling and elicitation arrive as input_required and are asked of the
  # legacy client); unpinned, Switchboard would serve them over a session of their own era, as
  # the dual-era configuration holds.
  pin=()
  [ "$upstream" = all-revisions ] && pin=(--transport stateless)
  "$SWITCHBOARD" --data-dir "$data" server add everything "http://127.0.0.1:$fixture_port/mcp" --prefix '' "${pin[@]}" \
    || die "switchboard server add failed"
  # The tasks extension's fixtures as the suite lists them: Switchboard runs their calls as tasks
  # itself, and which tools must always be tasks (or never) is its operator's to say.
  "$SWITCHBOARD" --data-dir "$data" server set-task-mode everything required \
    failing_job confirm_delete multi_input protocol_error_job >/dev/null \
    && "$SWITCHBOARD" --data-dir "$data" server set-task-mode everything forbidden greet >/dev/null \
    || die "switchboard server set-task-mode failed"
  "$SWITCHBOARD" --data-dir "$data" serve --listen "127.0.0.1:$serve_port" >"$WORK/server-serve-$upstream.log" 2>&1 &
  PIDS+=($!)
  if ! wait_connected "http://127.0.0.1:$serve_port/api/status"; then
    echo "conformance server ($upstream): FAILED: Switchboard did not connect to the upstream; its log:"
    tail -n 20 "$WORK/server-serve-$upstream.log"
    stop_all
    for rev in $server_revs; do
      SUMMARY+=("conformance-server-$rev: 0 passed, 1 failed (upstream: $upstream)")
      FAILED_REVS+=("server-$rev-$upstream")
    done
    continue
  fi
  if [[ "$COMPARED_CONFIGS" == *" $upstream "* ]]; then
    wanted=()
    for rev in $server_revs; do
      [[ " ${REVISIONS[*]} " == *" $rev "* ]] && wanted+=("$rev")
    done
    [ "${#wanted[@]}" -eq 0 ] || compare_eras "$upstream" "$fixture_port" "$serve_port" "${wanted[@]}"
    stop_all
    continue
  fi
  for rev in $server_revs; do
    [[ " ${REVISIONS[*]} " == *" $rev "* ]] || continue
    out="$WORK/conformance-server-$upstream-$rev"
    rm -rf "$out" "$out.log"
    mkdir -p "$out"
    echo
    echo "=== conformance server --requirements $rev, upstream: $upstream (log: $out.log) ==="
    set +e
    harness "$RUN_LIMIT" server --url "http://127.0.0.1:$serve_port/mcp" --requirements "$rev" -o "$out" \
      >"$out.log" 2>&1
    harness_rc=$?
    check_out="$("$NODE22" "$CI_DIR/conformance-check.mjs" "$out" "$rev" server 2>&1)"
    check_rc=$?
    set -e
    grep -E '^(Total|Not scored)' "$out.log" || true
    printf '%s\n' "$check_out"
    case "$harness_rc" in
      0) ;;
      124|137) echo "conformance server $rev: FAILED: the harness did not finish within ${RUN_LIMIT}s" ;;
      *) echo "conformance server $rev: FAILED: harness exited $harness_rc (a scored scenario failed; see $out.log)" ;;
    esac
    last="$(printf '%s\n' "$check_out" | tail -n 1)"
    if [[ ! "$last" =~ ^conformance-server-$rev:\ [0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
      echo "conformance server $rev: FAILED: the guard script did not produce its summary line"
      last="conformance-server-$rev: 0 passed, 1 failed"
      check_rc=1
    fi
    not_held="$(printf '%s\n' "$check_out" | grep -c '^  n/a ' || true)"
    if [ "$not_held" -gt 0 ]; then
      SUMMARY+=("$last (upstream: $upstream; $not_held scenarios of an unsupported extension not held)")
    else
      SUMMARY+=("$last (upstream: $upstream)")
    fi
    if [ "$harness_rc" -ne 0 ] || [ "$check_rc" -ne 0 ]; then FAILED_REVS+=("server-$rev-$upstream"); fi
  done
  stop_all
done

# Everything this script started is stopped: nothing accepts connections on the ports its
# upstreams and daemons listened on.
left="$("$NODE22" -e '
  const net = require("net");
  Promise.all(process.argv.slice(1).map((port) => new Promise((done) => {
    const socket = net.connect({ host: "127.0.0.1", port: Number(port) });
    socket.once("connect", () => { socket.destroy(); done(port); });
    socket.once("error", () => done(null));
  }))).then((open) => console.log(open.filter(Boolean).join(" ")));' "${USED_PORTS[@]}")"
if [ -n "$left" ]; then
  echo "conformance: FAILED: processes it started still listen on 127.0.0.1 port(s) $left"
  SUMMARY+=("conformance-stopped: 0 passed, 1 failed (still listening: $left)")
  FAILED_REVS+=("stopped")
else
  SUMMARY+=("conformance-stopped: 1 passed, 0 failed (every upstream and daemon it started is gone)")
fi

echo
if [ "${#FAILED_REVS[@]}" -gt 0 ]; then
  echo "conformance: FAILED for ${FAILED_REVS[*]} (results under $WORK)"
else
  echo "conformance: all revisions passed: ${REVISIONS[*]}"
fi
printf '%s\n' "${SUMMARY[@]}" | tee "$WORK/conformance-summary.txt"
[ "${#FAILED_REVS[@]}" -eq 0 ]
