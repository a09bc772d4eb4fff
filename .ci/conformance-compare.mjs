// Holds "a client gets through Switchboard at least what it gets directly" for one upstream and
// one requirement set (called by .ci/conformance.sh):
//
//   node conformance-compare.mjs <direct output dir> <through-Switchboard output dir> <label>
//
// Both dirs are `conformance server -o` outputs of the same `--requirements` run, one against
// the upstream's own URL and one against Switchboard's /mcp with that upstream behind it. A
// scenario passes when its checks.json has at least one SUCCESS and no FAILURE. Every scenario
// that passes directly must pass through Switchboard; one that passes only through Switchboard
// is reported (Switchboard bridged what the server's face lacks), never a failure. Prints one
// closing line `conformance-compare-<label>: N passed, M failed`, M being the scenarios lost.
import fs from 'node:fs';
import path from 'node:path';

const [directDir, throughDir, label] = process.argv.slice(2);
if (!directDir || !throughDir || !label) {
  console.error('usage: conformance-compare.mjs <direct dir> <through dir> <label>');
  process.exit(2);
}

/** scenario name -> whether it passed, from one output dir (`server-<scenario>-<timestamp>`). */
function outcomes(dir) {
  const passed = new Map();
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const scenario = entry.name.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
    const file = path.join(dir, entry.name, 'checks.json');
    const checks = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : [];
    const ok =
      checks.some((c) => c.status === 'SUCCESS') && !checks.some((c) => c.status === 'FAILURE');
    passed.set(scenario, ok);
  }
  return passed;
}

const direct = outcomes(directDir);
const through = outcomes(throughDir);
if (direct.size === 0) {
  console.log(`  no scenario ran directly against the upstream (${directDir})`);
  console.log(`conformance-compare-${label}: 0 passed, 1 failed`);
  process.exit(1);
}
const count = (m) => [...m.values()].filter(Boolean).length;
console.log(`  directly: ${count(direct)} of ${direct.size} scenarios pass; through Switchboard: ${count(through)} of ${through.size}`);
let kept = 0;
const lost = [];
for (const [scenario, ok] of [...direct].sort()) {
  if (!ok) continue;
  if (through.get(scenario)) kept += 1;
  else lost.push(scenario);
}
for (const scenario of lost) console.log(`  LOST ${scenario}: passes directly, not through Switchboard`);
for (const [scenario, ok] of [...through].sort()) {
  if (ok && !direct.get(scenario)) console.log(`  more ${scenario}: passes only through Switchboard`);
}
console.log(`conformance-compare-${label}: ${kept} passed, ${lost.length} failed`);
process.exit(lost.length === 0 ? 0 : 1);
