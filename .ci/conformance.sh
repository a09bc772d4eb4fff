#!/usr/bin/env bash
# Run the official MCP conformance suite's client scenarios against Switchboard's adapter.
#
#   .ci/conformance.sh [REVISION...]      (default: 2025-11-25 2026-07-28)
#
# Needs target/release/switchboard-conformance (cargo build --release --workspace --bins), npm,
# and the loopback guard at <repo>/../shared/tools/loopback-guard.mjs. The harness and the
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
# Both revisions always run; the last lines are one `conformance-<REVISION>: N passed, M failed`
# line per revision, and the exit status is 1 if any revision failed.
set -euo pipefail

ROOT="$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)"
CI_DIR="$ROOT/.ci"
WORK="$CI_DIR/work"
HARNESS_DIR="$WORK/harness"
ADAPTER="$ROOT/target/release/switchboard-conformance"
GUARD_REL="$ROOT/../shared/tools/loopback-guard.mjs"
# The harness's own scenario timeout is 30 s and scenarios run in parallel; a whole run takes
# well under a minute. This outer bound only stops a wedged harness from eating the CI budget.
RUN_LIMIT=600

die() { echo "conformance: ERROR: $*" >&2; exit 1; }

if [ "$#" -gt 0 ]; then REVISIONS=("$@"); else REVISIONS=(2025-11-25 2026-07-28); fi

# --- preconditions -----------------------------------------------------------------------------
[ -f "$GUARD_REL" ] || die "loopback guard not found at $GUARD_REL. It lives in the shared/ \
directory beside the repository (shared/tools/loopback-guard.mjs); the harness must not run \
without it, because no test may send traffic off this machine."
GUARD="$(cd "$(dirname "$GUARD_REL")" && pwd)/$(basename "$GUARD_REL")"
[ -x "$ADAPTER" ] || die "adapter binary $ADAPTER is missing. Build it first: \
cargo build --release --workspace --bins"
# The harness runs `<command> <url>` through /bin/sh and NODE_OPTIONS is split on spaces, so
# these paths must not contain spaces or shell metacharacters.
for p in "$ADAPTER" "$GUARD"; do
  [[ "$p" =~ ^[A-Za-z0-9_./+-]+$ ]] || die "path '$p' has characters unsafe for the harness command line; move the checkout"
done
command -v npm >/dev/null || die "npm is not on PATH; it is needed to install the pinned harness"

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
  # Node 22 first on PATH for the harness only; the guard preload refuses non-loopback
  # fetch/DNS inside the harness. `exec` makes the adapter replace the /bin/sh the harness
  # spawns, so the harness's timeout kill reaches the adapter itself instead of leaving it
  # orphaned, and the exit status the harness sees is the adapter's own.
  set +e
  PATH="$(dirname "$NODE22"):$PATH" NODE_OPTIONS="--import=$GUARD" \
    timeout --kill-after=30 "$RUN_LIMIT" "$NODE22" "$HARNESS_JS" client \
      --command "exec $ADAPTER" \
      --requirements "$rev" \
      -o "$out" </dev/null 2>&1 | tee "$out.log"
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
  PATH="$(dirname "$NODE22"):$PATH" NODE_OPTIONS="--import=$GUARD" \
    timeout --kill-after=30 120 "$NODE22" "$HARNESS_JS" client \
      --command "exec $ADAPTER" --scenario "$scenario" -o "$out" </dev/null 2>&1 | tail -n 3
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

echo
if [ "${#FAILED_REVS[@]}" -gt 0 ]; then
  echo "conformance: FAILED for ${FAILED_REVS[*]} (results under $WORK)"
else
  echo "conformance: all revisions passed: ${REVISIONS[*]}"
fi
printf '%s\n' "${SUMMARY[@]}" | tee "$WORK/conformance-summary.txt"
[ "${#FAILED_REVS[@]}" -eq 0 ]
