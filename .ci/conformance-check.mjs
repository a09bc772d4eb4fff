// Vacuous-pass guard for one conformance run (called by .ci/conformance.sh).
//
//   node conformance-check.mjs <output dir of `conformance client -o`> <revision>
//
// The harness can score a scenario as passing when the client did nothing (0 checks), and
// SKIPPED checks count as neither pass nor fail. So this script reads every non-auth
// scenario's checks.json and requires
//   - every scenario in REQUIRED[revision] to be present, each listed check id to appear with
//     SUCCESS at least the listed number of times (figures measured with a complete client),
//   - no FAILURE and no WARNING in any non-auth scenario (scored or not),
//   - no non-auth scenario this table does not know (a new one would go unguarded).
// auth/* scenarios are left to the harness and the expected-failures file: the adapter has
// no OAuth yet. It prints one closing line `conformance-<revision>: N passed, M failed`, where
// N counts SUCCESS rows of non-auth scenarios and M counts their FAILURE and WARNING rows plus
// every expected SUCCESS that is missing, so "0 failed" holds exactly when the guard passes.
import fs from 'node:fs';
import path from 'node:path';

const ELICITATION_DEFAULTS = ['string', 'integer', 'number', 'enum', 'boolean'].map(
  (t) => `client-elicitation-sep1034-${t}-default`,
);
// Not scored in either set (added after the anchor release), but it is non-auth, so it must
// pass too, and must really have been exercised.
const JSON_SCHEMA_PRESERVATION = {
  'json-schema-2020-12-client-tool-found': 1,
  'json-schema-2020-12-client-echo-completed': 1,
  'json-schema-2020-12-client-$schema-preserved': 1,
  'json-schema-2020-12-client-$defs-preserved': 1,
  'json-schema-2020-12-client-additionalProperties-preserved': 1,
  'sep-2106-client-anchor-keyword-preserved': 1,
  'sep-2106-client-composition-keywords-preserved': 1,
  'sep-2106-client-conditional-keywords-preserved': 1,
  'wire-schema-valid': 1,
};
const ones = (ids) => Object.fromEntries(ids.map((id) => [id, 1]));

// scenario -> { check id -> minimum number of SUCCESS rows }
const REQUIRED = {
  '2025-11-25': {
    initialize: ones(['mcp-client-initialization']),
    tools_call: ones(['tool-add-numbers', 'wire-schema-valid']),
    'elicitation-sep1034-client-defaults': ones(ELICITATION_DEFAULTS),
    'sse-retry': ones([
      'client-sse-graceful-reconnect',
      'client-sse-last-event-id',
      'client-sse-retry-timing',
    ]),
    'json-schema-2020-12-preservation': JSON_SCHEMA_PRESERVATION,
  },
  '2026-07-28': {
    tools_call: ones(['tool-add-numbers', 'wire-schema-valid']),
    // `sep-2575-client-declares-sampling-capability` is SKIPPED on purpose: Switchboard has no
    // model to sample with, so it does not declare a capability it cannot honour.
    'request-metadata': ones([
      'sep-2575-client-declares-elicitation-capability',
      'sep-2575-client-declares-roots-capability',
      'sep-2575-client-populates-meta',
      'sep-2575-client-retry-supported-version',
      'sep-2575-client-sends-client-info',
      'sep-2575-http-client-sends-version-header',
      'sep-2575-http-version-header-matches-meta',
    ]),
    'sep-2322-client-request-state': ones([
      'sep-2322-client-jsonrpc-id-different',
      'sep-2322-client-no-state-omitted',
      'sep-2322-client-parallel-isolation',
      'sep-2322-client-request-state-echoed',
      'sep-2322-default-result-type-complete',
    ]),
    // One SUCCESS per method exercised (6 methods + 3 Mcp-Name checks); a method the client
    // never sends shows up as SKIPPED, which the harness does not count as a failure.
    'http-standard-headers': { 'sep-2243-client-includes-standard-headers': 9 },
    'http-custom-headers': {
      'sep-2243-client-supports-custom-headers': 1,
      'sep-2243-client-mirrors-designated-params': 6,
      'sep-2243-client-encode-values': 3,
      'sep-2243-client-base64-unsafe': 7,
      'sep-2243-client-omit-null': 1,
    },
    'http-invalid-tool-headers': {
      'sep-2243-client-reject-invalid-tool': 1,
      'sep-2243-x-mcp-header-charset': 4,
      'sep-2243-x-mcp-header-not-empty': 1,
      'sep-2243-x-mcp-header-primitive-only': 4,
      'sep-2243-x-mcp-header-unique': 2,
    },
    'json-schema-ref-no-deref': ones(['sep-2106-no-network-ref-deref']),
    'json-schema-2020-12-preservation': JSON_SCHEMA_PRESERVATION,
  },
};

const [outDir, revision] = process.argv.slice(2);
const required = REQUIRED[revision];
if (!outDir || !required) {
  console.error(`usage: conformance-check.mjs <output dir> <${Object.keys(REQUIRED).join('|')}>`);
  process.exit(2);
}

// Non-auth results live in <outDir>/<scenario>-<ISO timestamp>/checks.json (auth ones under
// <outDir>/auth/, which we skip). The output dir is fresh per run, so one dir per scenario.
const results = new Map();
for (const entry of fs.readdirSync(outDir, { withFileTypes: true })) {
  if (!entry.isDirectory() || entry.name === 'auth') continue;
  const scenario = entry.name.replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
  const file = path.join(outDir, entry.name, 'checks.json');
  if (results.has(scenario)) throw new Error(`two result dirs for ${scenario} in ${outDir}`);
  results.set(scenario, {
    dir: path.join(outDir, entry.name),
    checks: fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : null,
  });
}

const problems = [];
let passed = 0;
let failed = 0;
for (const scenario of [...new Set([...Object.keys(required), ...results.keys()])].sort()) {
  const result = results.get(scenario);
  const want = Object.values(required[scenario] ?? {}).reduce((a, b) => a + b, 0);
  const mine = []; // this scenario's problems
  if (!required[scenario]) {
    failed += 1;
    mine.push(`not in this script's table; add its expected check ids`);
  }
  if (!result || !Array.isArray(result.checks)) {
    failed += Math.max(want, 1);
    mine.push(`no checks.json in ${outDir} (the scenario did not run?)`);
  } else {
    const count = (status) => result.checks.filter((c) => c.status === status).length;
    passed += count('SUCCESS');
    failed += count('FAILURE') + count('WARNING');
    for (const c of result.checks) {
      if (c.status === 'FAILURE' || c.status === 'WARNING') {
        mine.push(`${c.status} ${c.id}: ${c.errorMessage ?? c.description ?? ''}`);
      }
    }
    for (const [id, min] of Object.entries(required[scenario] ?? {})) {
      const n = result.checks.filter((c) => c.id === id && c.status === 'SUCCESS').length;
      if (n < min) {
        failed += min - n; // an expected check that never succeeded counts as a failed one
        const seen = result.checks.filter((c) => c.id === id).map((c) => c.status);
        mine.push(`expected ${min} SUCCESS of ${id}, got ${n} (rows: ${seen.join(', ') || 'none'})`);
      }
    }
    if (mine.length > 0) mine.push(`adapter output: ${result.dir}/stderr.txt`);
  }
  const got = result?.checks?.filter?.((c) => c.status === 'SUCCESS').length ?? 0;
  console.log(`  ${mine.length === 0 ? 'ok  ' : 'FAIL'} ${scenario}: ${got}/${want} expected SUCCESS checks`);
  for (const m of mine) console.log(`         ${m}`);
  problems.push(...mine);
}

console.log(`conformance-${revision}: ${passed} passed, ${failed} failed`);
process.exit(problems.length === 0 ? 0 : 1);
