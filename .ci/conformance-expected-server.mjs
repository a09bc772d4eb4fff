// What the conformance suite's server scenarios must show when they test Switchboard's front
// door (with switchboard-conformance-everything behind it): scenario -> { check id -> minimum
// number of SUCCESS rows }. Figures measured with the complete chain; used by
// conformance-check.mjs --side server.

const ones = (ids) => Object.fromEntries(ids.map((id) => [id, 1]));
// Most scenarios make one check of their own name plus the wire-schema check.
const plain = (names) => Object.fromEntries(names.map((n) => [n, ones([n, 'wire-schema-valid'])]));

// In both revisions.
const COMMON = {
  ...plain([
    'completion-complete',
    'tools-call-simple-text',
    'tools-call-image',
    'tools-call-audio',
    'tools-call-embedded-resource',
    'tools-call-mixed-content',
    'tools-call-error',
    'tools-call-with-progress',
    'resources-list',
    'resources-read-text',
    'resources-read-binary',
    'resources-templates-read',
    'prompts-list',
    'prompts-get-simple',
    'prompts-get-with-args',
    'prompts-get-embedded-resource',
    'prompts-get-with-image',
  ]),
  'dns-rebinding-protection': ones(['localhost-host-rebinding-rejected', 'localhost-host-valid-accepted']),
  // Not scored (pending), held to the same standard.
  'json-schema-2020-12': ones([
    'json-schema-2020-12-tool-found',
    'json-schema-2020-12-$schema',
    'json-schema-2020-12-$defs',
    'json-schema-2020-12-additionalProperties',
    'sep-2106-composition-keywords-preserved',
    'sep-2106-conditional-keywords-preserved',
    'sep-2106-anchor-keyword-preserved',
    'wire-schema-valid',
  ]),
};

const LEGACY = {
  ...COMMON,
  // Session requests are answered on SSE streams, and all three must work.
  'server-sse-multiple-streams': ones(['server-accepts-multiple-post-streams', 'server-sse-streams-functional']),
  ...plain([
    'logging-set-level',
    'ping',
    'tools-call-with-logging',
    'tools-call-sampling',
    'tools-call-elicitation',
    'resources-subscribe',
    'resources-unsubscribe',
  ]),
  'server-initialize': ones(['server-initialize', 'server-session-id-visible-ascii', 'wire-schema-valid']),
  'tools-list': ones(['tools-list', 'tools-name-format', 'wire-schema-valid']),
  'elicitation-sep1034-defaults': ones([
    ...['string', 'integer', 'number', 'enum', 'boolean'].map((t) => `elicitation-sep1034-${t}-default`),
    'wire-schema-valid',
  ]),
  'elicitation-sep1330-enums': ones([
    ...['untitled-single', 'titled-single', 'legacy-enumnames', 'untitled-multi', 'titled-multi'].map(
      (v) => `elicitation-sep1330-${v}`,
    ),
    'wire-schema-valid',
  ]),
  // Not scored (added after the release / pending).
  'server-session-lifecycle': ones([
    'server-session-initialized-accepted',
    'server-session-delete-accepted',
    'server-session-terminated-returns-404',
  ]),
  'server-sse-polling': ones(['server-sse-priming-event', 'server-sse-retry-field']),
};

// The input_required scenarios: `<slug>-incomplete` (the first answer asks) and
// `<slug>-complete` (the retry with answers completes).
const rounds = (scenario, slug) => ({
  [`input-required-result-${scenario}`]: ones([`sep-2322-${slug}-incomplete`, `sep-2322-${slug}-complete`, 'wire-schema-valid']),
});

const STATELESS = {
  ...COMMON,
  // A stateless request answered by one message gets application/json (no SSE stream), which
  // the suite accepts and reports as INFO ("SSE streaming is optional") instead of checking
  // streams; progress and input requests still come over SSE (tools-call-with-progress).
  'server-sse-multiple-streams': ones(['server-accepts-multiple-post-streams']),
  'tools-list': ones(['tools-list', 'tools-name-format', 'tools-list-deterministic-order', 'wire-schema-valid']),
  'sep-2164-resource-not-found': ones([
    'sep-2164-no-empty-contents',
    'sep-2164-error-code',
    'sep-2164-data-uri',
    'wire-schema-valid',
  ]),
  caching: ones([
    'sep-2549-tools-list-caching-hints',
    'sep-2549-prompts-list-caching-hints',
    'sep-2549-resources-list-caching-hints',
    'sep-2549-resources-templates-list-caching-hints',
    'sep-2549-resources-read-caching-hints',
    'sep-2549-ttl-non-negative',
    'sep-2549-cache-scope-valid',
    'wire-schema-valid',
  ]),
  'server-stateless': {
    ...ones([
      'sep-2575-request-meta-invalid-missing-meta',
      'sep-2575-request-meta-invalid-missing-protocol-version',
      'sep-2575-request-meta-invalid-missing-client-capabilities',
      'sep-2575-request-meta-client-info-optional',
      'sep-2575-server-implements-discover',
      'sep-2575-server-identifies-in-result-meta',
      'sep-2575-server-declares-prompts-in-discover',
      'sep-2575-discover-capabilities-match-handlers',
      'sep-2575-server-unsupported-version-error',
      'sep-2575-http-server-unsupported-version-400',
      'sep-2575-http-server-header-mismatch-400',
      'sep-2575-server-rejects-undeclared-capability',
      'sep-2575-missing-capability-http-400',
      ...['initialize', 'ping', 'logging-setlevel', 'resources-subscribe', 'resources-unsubscribe'].map(
        (m) => `sep-2575-http-server-method-not-found-404-${m}`,
      ),
      'sep-2575-http-server-method-not-found-404',
      'sep-2575-http-server-no-independent-requests-on-stream',
      'sep-2575-server-no-log-without-loglevel',
      'sep-2575-server-sends-subscription-ack',
      'sep-2575-server-tags-subscription-id',
      'sep-2575-server-honors-notification-filter',
      'sep-2575-server-sends-prompts-list-changed-on-subscription',
      'sep-2575-server-sends-tools-list-changed-on-subscription',
      'sep-2575-http-server-error-jsonrpc-id',
    ]),
    'sep-2575-http-server-meta-invalid-400': 3,
  },
  ...rounds('basic-elicitation', 'elicitation'),
  ...rounds('basic-sampling', 'sampling'),
  ...rounds('basic-list-roots', 'list-roots'),
  ...rounds('request-state', 'request-state'),
  ...rounds('multiple-input-requests', 'multiple-inputs'),
  ...rounds('non-tool-request', 'non-tool'),
  'input-required-result-multi-round': ones([
    'sep-2322-multi-round-r1',
    'sep-2322-multi-round-r2',
    'sep-2322-multi-round-r3',
    'wire-schema-valid',
  ]),
  'input-required-result-missing-input-response': ones(['sep-2322-missing-response-rerequests', 'wire-schema-valid']),
  'input-required-result-result-type': ones(['sep-2322-result-type-included', 'wire-schema-valid']),
  'input-required-result-unsupported-methods': ones(['sep-2322-not-on-unsupported-requests', 'wire-schema-valid']),
  'input-required-result-tampered-state': ones(['sep-2322-reject-tampered-state', 'wire-schema-valid']),
  'input-required-result-capability-check': ones(['sep-2322-respect-client-capabilities', 'wire-schema-valid']),
  'input-required-result-ignore-extra-params': ones(['sep-2322-ignore-unexpected-params', 'wire-schema-valid']),
  'input-required-result-validate-input': ones([
    'sep-2322-validate-input-responses',
    'sep-2322-error-on-protocol-error',
    'wire-schema-valid',
  ]),
  // Not scored (pending).
  'http-header-validation': {
    'sep-2243-server-reject-invalid-headers': 5,
    'sep-2243-server-reject-error-code': 5,
    'sep-2243-server-accepts-whitespace-header-value': 1,
    'sep-2243-header-name-case-insensitive': 2,
    'wire-schema-valid': 1,
  },
  'http-custom-header-server-validation': {
    'sep-2243-server-decode-base64': 1,
    'sep-2243-server-reject-invalid-param-chars': 2,
    'sep-2243-server-reject-param-mismatch': 3,
    'sep-2243-server-validate-param-match': 3,
    'wire-schema-valid': 1,
  },
  // The tasks extension (SEP-2663): Switchboard runs the fixture's calls as tasks itself, with
  // the task modes .ci/conformance.sh sets (failing_job, confirm_delete, multi_input and
  // protocol_error_job required, greet forbidden, the rest optional).
  'tasks-capability-negotiation': ones([
    'tasks-extension-advertised',
    'sep-2663-tasks-methods-non-declaring',
    'sep-2663-server-rejects-undeclared-client',
    'tasks-per-request-meta-opt-in',
    'wire-schema-valid',
  ]),
  'tasks-dispatch-and-envelope': ones([
    'sep-2663-tasks-result-removed-method-not-found',
    'tasks-removed-tasks-list',
    'tasks-server-directed-creation-no-hint',
    'sep-2663-legacy-task-param-ignored',
    'tasks-immediate-result-shortcut',
    'tasks-result-type-complete-on-non-task-responses',
    'sep-2663-durable-create-strong-consistency',
    'sep-2663-tasks-get-invalid-task-id-32602',
    'wire-schema-valid',
  ]),
  'tasks-lifecycle': ones([
    'tasks-sync-tool-call',
    'sep-2663-result-type-task-on-create',
    'sep-2663-tasks-get-status-working',
    'sep-2663-tasks-get-status-completed',
    'sep-2663-tool-error-uses-completed-status',
    'sep-2663-tasks-get-status-failed',
    'sep-2663-cancel-ack-empty-result',
    'tasks-cancel-terminal-idempotent-ack',
    'wire-schema-valid',
  ]),
  'tasks-mrtr-composition': ones(['sep-2663-mrtr-synchronous-before-task-creation', 'wire-schema-valid']),
  'tasks-mrtr-input': ones([
    'sep-2663-tasks-get-status-input-required',
    'tasks-mrtr-tasks-update-resumes',
    'tasks-mrtr-partial-fulfillment',
    'wire-schema-valid',
  ]),
  'tasks-request-headers': ones([
    'tasks-headers-tolerate-mcp-method-on-tools-call',
    'sep-2663-routing-headers-accepted-on-tasks-get',
    'tasks-headers-reject-mismatched-method',
    'sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get',
    'wire-schema-valid',
  ]),
  'tasks-request-state-removal': ones([
    'tasks-create-result-no-request-state',
    'tasks-get-detailed-no-request-state',
    'wire-schema-valid',
  ]),
  'tasks-required-task-error': ones([
    'sep-2663-server-returns-missing-capability-when-required',
    'sep-2663-server-returns-missing-capability-data-shape',
    'wire-schema-valid',
  ]),
  'tasks-wire-fields': ones([
    'tasks-wire-field-renames',
    'tasks-no-early-ttl-expiry',
    'tasks-no-related-task-meta-on-inlined-result',
    'wire-schema-valid',
  ]),
};

/** Expected checks per revision. */
export const SERVER_REQUIRED = { '2025-11-25': LEGACY, '2026-07-28': STATELESS };

/**
 * Scenarios run but not held to a pass, each with the reason; the guard prints them every run.
 */
export const SERVER_UNSUPPORTED = {
  // Optional in the spec; the suite itself skips it (its harness does not read the
  // subscriptions/listen stream yet), and Switchboard sends no notifications/tasks.
  'tasks-status-notifications': 'skipped by the suite; Switchboard sends no notifications/tasks',
};
