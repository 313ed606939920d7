// gen.js signs the Slack interaction requests of vectors.json as Slack
// sends them to an app's Interactivity Request URL: a form body whose
// payload field is the interaction's JSON (docs.slack.dev/reference/
// interaction-payloads), signed v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">
// with the signing secret; each is checked with @slack/bolt's own verifier
// and parsed with bolt's own body parser. It needs the hook vectors'
// node_modules (@slack/bolt 5.1.0):
//
//   cd hook/testdata/vectors && npm ci
//   NODE_PATH=$PWD/node_modules node ../../../approvals/testdata/slack/gen.js > ../../../approvals/testdata/slack/vectors.json
//
// The Go tests read only vectors.json.
'use strict';
const crypto = require('node:crypto');
const querystring = require('node:querystring');
const assert = require('node:assert');
const { isValidSlackRequest } = require('@slack/bolt/dist/receivers/verify-request');
const { parseHTTPRequestBody } = require('@slack/bolt/dist/receivers/HTTPModuleFunctions');

const T = 1767225600; // 2026-01-01T00:00:00Z, the "now" of every vector
const secret = '8f742231b10e8888abcd99yyyzzz85a5';
const DRAFT = 'd01JDRAFTVECTQR0000000000AA'; // the test stores its event with id 01JDRAFTVECTQR0000000000AA
const vectors = [];

const user = (id, name) => ({ id, username: name, name, team_id: 'T0001' });
const message = {
  type: 'message', ts: '1767225500.000100', user: 'B0BOT', bot_id: 'B0BOT', text: 'Draft reply to Ada waits for approval',
};
function blockAction(u, actionID, label) {
  return {
    type: 'block_actions', user: u, api_app_id: 'A0001', token: 'XXYYZZ',
    container: { type: 'message', message_ts: message.ts, channel_id: 'C0ACME', is_ephemeral: false },
    trigger_id: '1767225600.1.abcdef' + actionID.length, team: { id: 'T0001', domain: 'acme' },
    enterprise: null, is_enterprise_install: false,
    channel: { id: 'C0ACME', name: 'approvals' }, message,
    state: { values: {} },
    response_url: 'https://hooks.slack.com/actions/T0001/1767225600/' + actionID.replace('.', '-'),
    actions: [{ action_id: actionID, block_id: 'handoff.decide', text: { type: 'plain_text', text: label, emoji: true },
      value: DRAFT, type: 'button', action_ts: '1767225600.000200' }],
  };
}
function viewSubmission(u, text) {
  return {
    type: 'view_submission', team: { id: 'T0001', domain: 'acme' }, user: u, api_app_id: 'A0001', token: 'XXYYZZ',
    trigger_id: '1767225600.2.fedcba',
    view: {
      id: 'V0001', team_id: 'T0001', type: 'modal', callback_id: 'handoff.edit_modal', private_metadata: DRAFT,
      title: { type: 'plain_text', text: 'Edit the reply' },
      blocks: [{ type: 'input', block_id: 'handoff.reply', label: { type: 'plain_text', text: 'Reply' },
        element: { type: 'plain_text_input', action_id: 'handoff.reply', multiline: true } }],
      state: { values: { 'handoff.reply': { 'handoff.reply': { type: 'plain_text_input', value: text } } } },
      hash: '1767225600.abc', app_id: 'A0001', bot_id: 'B0BOT',
    },
    response_urls: [], is_enterprise_install: false, enterprise: null,
  };
}

function add(name, payload, opts = {}) {
  const body = querystring.stringify({ payload: JSON.stringify(payload) });
  const ts = opts.ts || T;
  const key = opts.secret || secret;
  const sig = 'v0=' + crypto.createHmac('sha256', key).update(`v0:${ts}:${body}`).digest('hex');
  const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-signature': sig, 'x-slack-request-timestamp': ts };
  const valid = isValidSlackRequest({ signingSecret: secret, body, nowMilliseconds: T * 1000, headers });
  assert.strictEqual(valid, !opts.invalid, name + ': bolt says ' + valid);
  assert.deepStrictEqual(parseHTTPRequestBody({ rawBody: Buffer.from(body), headers }), payload);
  vectors.push({ name, now: T, valid, body, headers: {
    'Content-Type': headers['content-type'], 'X-Slack-Signature': sig, 'X-Slack-Request-Timestamp': String(ts) } });
}

const dana = user('U0DANA', 'dana'); // mapped to dana (acme) by approvals.slack.users
const bea = user('U0BEA', 'bea');    // found by her profile email: beta only
add('approve by dana', blockAction(dana, 'handoff.approve', 'Approve'));
add('approve by bea of another client', blockAction(bea, 'handoff.approve', 'Approve'));
add('reject by dana', blockAction(dana, 'handoff.reject', 'Reject'));
add('undo by dana', blockAction(dana, 'handoff.undo', 'Undo'));
add('edit by dana', blockAction(dana, 'handoff.edit', 'Edit'));
add('edited reply submitted by dana', viewSubmission(dana, 'Hi Ada, the blue one is in stock: shall I hold it for you?'));
add('approve by a stranger', blockAction(user('U0STRANGER', 'eve'), 'handoff.approve', 'Approve'));
add('signed with another secret', blockAction(dana, 'handoff.approve', 'Approve'), { secret: 'not-the-signing-secret', invalid: true });
add('signed six minutes ago', blockAction(dana, 'handoff.approve', 'Approve'), { ts: T - 360, invalid: true });
process.stdout.write(JSON.stringify({ secret, draft: DRAFT, vectors }, null, 1) + '\n');
