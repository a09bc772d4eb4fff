// Vacuous-pass guard for one conformance run (called by .ci/conformance.sh).
//
//   node conformance-check.mjs <output dir of `conformance client|server -o`> <revision> [server]
//
// The server side's table (what Switchboard's front door must show) is in
// conformance-expected-server.mjs; scenarios it lists as unsupported are reported, not held.
//
// The harness can score a scenario as passing when the client did nothing (0 checks), and
// SKIPPED checks count as neither pass nor fail; in --requirements mode it also ignores
// WARNINGs and every extension scenario. So this script reads every scenario's checks.json
// (auth/* and extensions included) and requires
//   - every scenario in REQUIRED[revision] to be present, each listed check id to appear with
//     SUCCESS at least the listed number of times (figures measured with a complete client),
//   - no FAILURE and no WARNING in any scenario (scored or not),
//   - no scenario this table does not know (a new one would go unguarded).
// It prints one closing line `conformance-<revision>: N passed, M failed`, where N counts
// SUCCESS rows and M counts FAILURE and WARNING rows plus every expected SUCCESS that is
// missing, so "0 failed" holds exactly when the guard passes.
import fs from 'node:fs';
import path from 'node:path';
import { SERVER_REQUIRED, SERVER_UNSUPPORTED } from './conformance-expected-server.mjs';

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

// --- auth scenarios -------------------------------------------------------------------------
// Checks every authorization-code sign-in produces when it goes all the way.
const SIGN_IN = [
  'prm-pathbased-requested',
  'authorization-server-metadata',
  'authorization-request',
  'pkce-code-challenge-sent',
  'pkce-s256-method-used',
  'token-request',
  'pkce-code-verifier-sent',
  'pkce-verifier-matches-challenge',
  'valid-bearer-token',
];
// Sign-ins that stop before the token request (the redirect's `iss` is refused).
const REFUSED_AT_REDIRECT = [
  'prm-pathbased-requested',
  'authorization-server-metadata',
  'authorization-request',
  'pkce-code-challenge-sent',
  'pkce-s256-method-used',
  'client-registration',
];
const RESOURCE = [
  'resource-parameter-in-authorization',
  'resource-parameter-in-token',
  'resource-parameter-valid-uri',
  'resource-parameter-consistency',
  'resource-parameter-matches-prm',
];
// 2026-07-28 checks that every dynamic registration carries application_type.
const DCR = { '2025-11-25': ['client-registration'], '2026-07-28': ['client-registration', 'sep-837-application-type-present'] };
const MACHINE = ['prm-pathbased-requested', 'authorization-server-metadata', 'token-request', 'valid-bearer-token'];

function authScenarios(rev) {
  const dcr = DCR[rev];
  const table = {
    'auth/metadata-default': ones([...SIGN_IN, ...dcr, ...RESOURCE]),
    'auth/metadata-var1': ones([...SIGN_IN, ...dcr, ...RESOURCE]),
    'auth/metadata-var2': ones([...SIGN_IN, ...dcr, ...RESOURCE]),
    'auth/metadata-var3': ones([...SIGN_IN, ...dcr, ...RESOURCE]),
    'auth/basic-cimd': ones([...SIGN_IN, 'cimd-client-id-used']),
    'auth/scope-from-www-authenticate': ones([...SIGN_IN, ...dcr, 'scope-from-www-authenticate']),
    'auth/scope-from-scopes-supported': ones([...SIGN_IN, ...dcr, 'scope-from-scopes-supported']),
    'auth/scope-omitted-when-undefined': ones([...SIGN_IN, ...dcr, 'scope-omitted-when-undefined']),
    'auth/scope-step-up': ones([
      ...SIGN_IN,
      ...dcr,
      'scope-step-up-initial',
      'scope-step-up-escalation',
      ...(rev === '2026-07-28' ? ['sep-2350-scope-union-on-reauth'] : []),
    ]),
    // The server never accepts the token; valid-bearer-token is not expected.
    'auth/scope-retry-limit': ones([...SIGN_IN.filter((id) => id !== 'valid-bearer-token'), ...dcr, 'scope-retry-limit']),
    'auth/token-endpoint-auth-basic': ones([...SIGN_IN, ...dcr, ...RESOURCE, 'token-endpoint-auth-method']),
    'auth/token-endpoint-auth-post': ones([...SIGN_IN, ...dcr, ...RESOURCE, 'token-endpoint-auth-method']),
    'auth/token-endpoint-auth-none': ones([...SIGN_IN, ...dcr, ...RESOURCE, 'token-endpoint-auth-method']),
    'auth/pre-registration': ones([...SIGN_IN, 'pre-registration-auth']),
    // Extensions: not scored by the harness, held to the same standard here.
    'auth/client-credentials-jwt': ones([...MACHINE, 'client-credentials-jwt-verified']),
    'auth/client-credentials-basic': ones([...MACHINE, 'client-credentials-basic-auth']),
    'auth/enterprise-managed-authorization': ones([...MACHINE, 'complete-flow-token-exchange', 'complete-flow-jwt-bearer']),
    'auth/wif-jwt-bearer': ones([...MACHINE, 'wif-assertion-verified']),
    // The DPoP resource server does not emit valid-bearer-token; its own checks cover the token.
    'auth/dpop': ones([
      ...SIGN_IN.filter((id) => id !== 'valid-bearer-token'),
      ...dcr,
      'sep-1932-client-token-request-proof',
      'sep-1932-client-dpop-auth-scheme',
      'sep-1932-client-fresh-proof',
    ]),
    'auth/dpop-nonce': ones([
      ...SIGN_IN.filter((id) => id !== 'valid-bearer-token'),
      ...dcr,
      'sep-1932-client-token-request-proof',
      'sep-1932-client-dpop-auth-scheme',
      'sep-1932-client-fresh-proof',
      'sep-1932-client-as-nonce',
      'sep-1932-client-rs-nonce',
    ]),
  };
  if (rev === '2026-07-28') {
    Object.assign(table, {
      'auth/resource-mismatch': ones(['prm-pathbased-requested', 'resource-mismatch-rejected']),
      'auth/offline-access-scope': ones([...SIGN_IN, 'sep-2207-offline-access-requested']),
      'auth/offline-access-not-supported': ones([...SIGN_IN, ...dcr, 'sep-2207-offline-access-not-requested']),
      'auth/authorization-server-migration': {
        ...ones([...SIGN_IN, 'sep-2352-no-cross-as-credential-reuse', 'sep-2352-no-reuse-on-as-change', 'sep-2352-reregister-on-as-change']),
        // One registration at each authorization server.
        'client-registration': 2,
        'sep-837-application-type-present': 2,
      },
      'auth/iss-supported': ones([...SIGN_IN, ...dcr, 'sep-2468-client-compare-iss-supported']),
      'auth/iss-not-advertised': ones([...SIGN_IN, ...dcr, 'sep-2468-client-proceed-no-iss']),
      'auth/iss-supported-missing': ones([...REFUSED_AT_REDIRECT, ...dcr, 'sep-2468-client-reject-missing-iss']),
      'auth/iss-wrong-issuer': ones([...REFUSED_AT_REDIRECT, ...dcr, 'sep-2468-client-compare-iss-supported']),
      'auth/iss-unexpected': ones([...REFUSED_AT_REDIRECT, ...dcr, 'sep-2468-client-compare-iss-unadvertised']),
      'auth/iss-normalized': ones([...REFUSED_AT_REDIRECT, ...dcr, 'sep-2468-client-no-normalization']),
      'auth/metadata-issuer-mismatch': ones([
        'prm-pathbased-requested',
        'authorization-server-metadata',
        'sep-2468-client-validate-metadata-issuer',
      ]),
    });
  }
  return table;
}

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
    ...authScenarios('2025-11-25'),
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
    ...authScenarios('2026-07-28'),
  },
};

const [outDir, revision, side = 'client'] = process.argv.slice(2);
const server = side === 'server';
const required = (server ? SERVER_REQUIRED : REQUIRED)[revision];
const unsupported = server ? SERVER_UNSUPPORTED : {};
if (!outDir || !required || !['client', 'server'].includes(side)) {
  console.error(`usage: conformance-check.mjs <output dir> <${Object.keys(REQUIRED).join('|')}> [client|server]`);
  process.exit(2);
}
const label = server ? `conformance-server-${revision}` : `conformance-${revision}`;

// Results live in <outDir>/<scenario>-<ISO timestamp>/checks.json, auth ones under
// <outDir>/auth/<name>-<ISO timestamp>/. The output dir is fresh per run, so one dir per
// scenario.
const results = new Map();
function collect(dir, prefix) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    if (prefix === '' && entry.name === 'auth') {
      collect(path.join(dir, 'auth'), 'auth/');
      continue;
    }
    // Server results are named server-<scenario>-<timestamp>.
    const name = server ? entry.name.replace(/^server-/, '') : entry.name;
    const scenario = prefix + name.replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
    const file = path.join(dir, entry.name, 'checks.json');
    if (results.has(scenario)) throw new Error(`two result dirs for ${scenario} in ${outDir}`);
    results.set(scenario, {
      dir: path.join(dir, entry.name),
      checks: fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : null,
    });
  }
}
collect(outDir, '');

const problems = [];
let passed = 0;
let failed = 0;
for (const scenario of [...new Set([...Object.keys(required), ...results.keys()])].sort()) {
  const result = results.get(scenario);
  if (unsupported[scenario]) {
    const failing = result?.checks?.filter?.((c) => c.status === 'FAILURE').length ?? 0;
    console.log(`  n/a  ${scenario}: not held (${unsupported[scenario]}); ${failing} failing checks`);
    continue;
  }
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
    if (mine.length > 0 && !server) mine.push(`adapter output: ${result.dir}/stderr.txt`);
  }
  const got = result?.checks?.filter?.((c) => c.status === 'SUCCESS').length ?? 0;
  console.log(`  ${mine.length === 0 ? 'ok  ' : 'FAIL'} ${scenario}: ${got}/${want} expected SUCCESS checks`);
  for (const m of mine) console.log(`         ${m}`);
  problems.push(...mine);
}

console.log(`${label}: ${passed} passed, ${failed} failed`);
process.exit(problems.length === 0 ? 0 : 1);
