// gen.js signs the inbound test vectors with each provider's own SDK, or,
// where the provider ships none that signs (Meta, Slack, Typeform, Shopify,
// Mailgun, Telegram, Postmark, SendGrid), with node:crypto exactly as its
// documentation gives, checked against the SDK's verifier where one exists.
//
//   cd hook/testdata/vectors && npm install && node gen.js > ../vectors.json
//
// The Go tests read only ../vectors.json: they need neither node nor npm.
'use strict';
const crypto = require('node:crypto');
const querystring = require('node:querystring');
const assert = require('node:assert');
const twilio = require('twilio');
const Stripe = require('stripe');
const { Webhook: SvixWebhook } = require('svix');
const { Webhook: StandardWebhook } = require('standardwebhooks');
const { isValidSlackRequest } = require('@slack/bolt/dist/receivers/verify-request');

const BASE = 'https://handoff.example.com';
const T = 1767225600; // 2026-01-01T00:00:00Z, the "now" of every vector
const hmac = (alg, key, data) => crypto.createHmac(alg, key).update(data);
const vectors = [];
const add = (v) => vectors.push({ now: T, ...v });

// Twilio: X-Twilio-Signature over the full URL plus the sorted form params.
const twilioToken = '12345678901234567890123456789012';
const twilioForm = (fields) => querystring.stringify(fields);
function twilioSigned(name, channel, body, kind) {
  const path = '/hooks/' + channel;
  const params = querystring.parse(body);
  const sig = twilio.getExpectedTwilioSignature(twilioToken, BASE + path, params);
  assert.ok(twilio.validateRequest(twilioToken, sig, BASE + path, params));
  add({ name, preset: 'twilio', scheme: 'twilio', kind, channel, path, secret: twilioToken,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-Twilio-Signature': sig }, body });
}
twilioSigned('twilio sms', 'sms', twilioForm({
  ToCountry: 'US', SmsMessageSid: 'SM1f0e8ae6ade43cb3c0ce4525424e404f', NumMedia: '0', ToCity: '',
  FromState: 'CA', SmsSid: 'SM1f0e8ae6ade43cb3c0ce4525424e404f', FromCity: 'SAN FRANCISCO',
  Body: 'Hi, do you have the blue one in stock?', FromCountry: 'US', To: '+15017122661',
  MessagingServiceSid: 'MG9752274e9e519418a7406176694466fa', ToZip: '', NumSegments: '1',
  MessageSid: 'SM1f0e8ae6ade43cb3c0ce4525424e404f', AccountSid: 'ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX',
  From: '+15558675310', ApiVersion: '2010-04-01', SmsStatus: 'received',
}), 'message');
twilioSigned('twilio whatsapp', 'sms', twilioForm({
  SmsMessageSid: 'SM2a0e8ae6ade43cb3c0ce4525424e4050', NumMedia: '0', ProfileName: 'Ana Souza',
  WaId: '5511999990000', SmsSid: 'SM2a0e8ae6ade43cb3c0ce4525424e4050', SmsStatus: 'received',
  Body: 'Olá, ainda está disponível?', To: 'whatsapp:+14155238886', NumSegments: '1',
  MessageSid: 'SM2a0e8ae6ade43cb3c0ce4525424e4050', AccountSid: 'ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX',
  From: 'whatsapp:+5511999990000', ApiVersion: '2010-04-01',
}), 'message');
twilioSigned('twilio status callback', 'sms', twilioForm({
  SmsSid: 'SM9c1a2b3c4d5e6f708192a3b4c5d6e7f8', SmsStatus: 'delivered', MessageStatus: 'delivered',
  To: '+15558675310', MessageSid: 'SM9c1a2b3c4d5e6f708192a3b4c5d6e7f8',
  AccountSid: 'ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX', From: '+15017122661', ApiVersion: '2010-04-01',
}), 'notification');
{
  // A JSON callback: the body's SHA-256 rides in the URL, which is signed.
  const body = JSON.stringify({ MessageSid: 'SM7d7d7d7d7d7d7d7d7d7d7d7d7d7d7d7d', From: '+15558675310', Body: 'JSON hello' });
  const hash = crypto.createHash('sha256').update(body).digest('hex');
  const path = '/hooks/sms-json?bodySHA256=' + hash;
  const sig = twilio.getExpectedTwilioSignature(twilioToken, BASE + path, {});
  assert.ok(twilio.validateRequestWithBody(twilioToken, sig, BASE + path, body));
  add({ name: 'twilio json callback', preset: 'twilio', scheme: 'twilio', kind: 'message', channel: 'sms-json', path,
    secret: twilioToken, headers: { 'Content-Type': 'application/json', 'X-Twilio-Signature': sig }, body });
}

// Meta (WhatsApp Cloud, Messenger, Instagram): X-Hub-Signature-256: sha256=<hex HMAC of the body with the app secret>.
const appSecret = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
function metaSigned(name, preset, channel, payload, kind) {
  const body = JSON.stringify(payload);
  const sig = 'sha256=' + hmac('sha256', appSecret, body).digest('hex');
  add({ name, preset, scheme: 'meta', kind, channel, path: '/hooks/' + channel, secret: appSecret,
    headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': sig }, body });
}
const waValue = (extra) => ({ messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' }, ...extra });
const waText = (id, from, text) => ({ from, id, timestamp: String(T), text: { body: text }, type: 'text' });
const wa = (value) => ({ object: 'whatsapp_business_account', entry: [{ id: '102290129340398', changes: [{ value, field: 'messages' }] }] });
metaSigned('whatsapp message', 'whatsapp', 'wa', wa(waValue({
  contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' }],
  messages: [waText('wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=', '16505551234', 'Does it come in another color?')],
})), 'message');
metaSigned('whatsapp batch', 'whatsapp', 'wa', wa(waValue({
  contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' }],
  messages: [
    waText('wamid.BATCH0001', '16505551234', 'First question'),
    waText('wamid.BATCH0002', '16505551234', 'And a second one'),
  ],
})), 'batch');
metaSigned('whatsapp statuses', 'whatsapp', 'wa', wa(waValue({
  statuses: [
    { id: 'wamid.OURSEND0001', status: 'delivered', timestamp: String(T), recipient_id: '16505551234' },
    { id: 'wamid.OURSEND0002', status: 'read', timestamp: String(T), recipient_id: '16505551234' },
  ],
})), 'notification');
metaSigned('messenger message', 'messenger', 'fb', { object: 'page', entry: [{ id: '1234567890', time: T * 1000, messaging: [
  { sender: { id: '6789012345' }, recipient: { id: '1234567890' }, timestamp: T * 1000, message: { mid: 'm_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P', text: 'Is this still for sale?' } },
] }] }, 'message');
metaSigned('messenger delivery', 'messenger', 'fb', { object: 'page', entry: [{ id: '1234567890', time: T * 1000, messaging: [
  { sender: { id: '6789012345' }, recipient: { id: '1234567890' }, timestamp: T * 1000, delivery: { mids: ['m_OURSEND'], watermark: T * 1000 } },
] }] }, 'notification');
metaSigned('instagram message', 'instagram', 'ig', { object: 'instagram', entry: [{ id: '17841400000000000', time: T * 1000, messaging: [
  { sender: { id: '5566778899' }, recipient: { id: '17841400000000000' }, timestamp: T * 1000, message: { mid: 'aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAwMDAwMDAwOjM0MDI4MjM2Njg0MTcxMDMwMTI0NDI1OTY1MTU5ODQ0OTI5NDQyMjozMTk3NTk5NjkxNDI5MjgyMjQ2MDk1OTM1MjM3MDI0MjA0OAZDZD', text: 'Hi! Do you ship to Canada?' } },
] }] }, 'message');
metaSigned('instagram echo of our own send', 'instagram', 'ig', { object: 'instagram', entry: [{ id: '17841400000000000', time: T * 1000, messaging: [
  { sender: { id: '17841400000000000' }, recipient: { id: '5566778899' }, timestamp: T * 1000, message: { mid: 'aWdfOURSEND', text: 'Yes we do', is_echo: true } },
] }] }, 'notification');

// Slack: v0=<hex HMAC of "v0:<timestamp>:<body>"> with the signing secret.
const slackSecret = '8f742231b10e8888abcd99yyyzzz85a5';
function slackSigned(name, payload, kind) {
  const body = JSON.stringify(payload);
  const sig = 'v0=' + hmac('sha256', slackSecret, `v0:${T}:${body}`).digest('hex');
  assert.ok(isValidSlackRequest({ signingSecret: slackSecret, body, nowMilliseconds: T * 1000,
    headers: { 'x-slack-signature': sig, 'x-slack-request-timestamp': T } }));
  add({ name, preset: 'slack', scheme: 'slack', kind, channel: 'slack', path: '/hooks/slack', secret: slackSecret,
    headers: { 'Content-Type': 'application/json', 'X-Slack-Signature': sig, 'X-Slack-Request-Timestamp': String(T) }, body });
}
slackSigned('slack message', { token: 'XXYYZZ', team_id: 'T0001', api_app_id: 'A0001', type: 'event_callback', event_id: 'Ev08MFMKH6', event_time: T,
  event: { type: 'message', channel: 'D024BE91L', user: 'U2147483697', text: 'Hello, can someone call me back?', ts: '1767225600.000200', channel_type: 'im' } }, 'message');
slackSigned('slack url_verification', { token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' }, 'handshake');
slackSigned('slack reaction', { token: 'XXYYZZ', team_id: 'T0001', type: 'event_callback', event_id: 'Ev08REACT1', event_time: T,
  event: { type: 'reaction_added', user: 'U2147483697', reaction: 'thumbsup', item: { type: 'message', channel: 'C0G9QF9GZ', ts: '1360782400.498405' }, event_ts: '1767225600.000300' } }, 'notification');
slackSigned('slack bot message', { token: 'XXYYZZ', team_id: 'T0001', type: 'event_callback', event_id: 'Ev08BOT001', event_time: T,
  event: { type: 'message', subtype: 'bot_message', bot_id: 'B0001', channel: 'D024BE91L', text: 'Our own reply', ts: '1767225600.000400' } }, 'notification');

// Telegram: the secret_token given to setWebhook, echoed in a header.
const tgToken = 'tg-secret_Token-123';
function tgSigned(name, payload, kind) {
  add({ name, preset: 'telegram', scheme: 'token', kind, channel: 'tg', path: '/hooks/tg', secret: tgToken,
    headers: { 'Content-Type': 'application/json', 'X-Telegram-Bot-Api-Secret-Token': tgToken }, body: JSON.stringify(payload) });
}
tgSigned('telegram message', { update_id: 10000, message: { message_id: 1365, date: T, chat: { id: 1111111, type: 'private', first_name: 'Ivan' }, from: { id: 1111111, is_bot: false, first_name: 'Ivan', username: 'ivan' }, text: 'Привет! What are your hours?' } }, 'message');
tgSigned('telegram edited message', { update_id: 10001, edited_message: { message_id: 1365, date: T, edit_date: T + 5, chat: { id: 1111111, type: 'private' }, from: { id: 1111111, is_bot: false, first_name: 'Ivan' }, text: 'edited' } }, 'notification');

// Multipart bodies: SendGrid Inbound Parse and Mailgun routes.
function multipart(boundary, parts) {
  let s = '';
  for (const p of parts) {
    s += `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"` + (p.filename ? `; filename="${p.filename}"` : '') + '\r\n';
    if (p.type) s += `Content-Type: ${p.type}\r\n`;
    s += '\r\n' + p.value + '\r\n';
  }
  return s + `--${boundary}--\r\n`;
}
const basic = (user, pass) => 'Basic ' + Buffer.from(`${user}:${pass}`).toString('base64');
{
  const boundary = 'xYzZY';
  const body = multipart(boundary, [
    { name: 'headers', value: 'Received: by mx0047p1mdw1.sendgrid.net\nMessage-ID: <CAB9-sendgrid-0001@mail.example.com>\nFrom: Jane Doe <jane@example.com>\nSubject: Quote request\nTo: sales@inbound.example.com\n' },
    { name: 'dkim', value: '{@example.com : pass}' },
    { name: 'to', value: 'sales@inbound.example.com' },
    { name: 'from', value: 'Jane Doe <jane@example.com>' },
    { name: 'subject', value: 'Quote request' },
    { name: 'text', value: 'Hello, could you send me a quote for 40 chairs?\n' },
    { name: 'envelope', value: '{"to":["sales@inbound.example.com"],"from":"jane@example.com"}' },
    { name: 'attachments', value: '1' },
    { name: 'attachment-info', value: '{"attachment1":{"filename":"floorplan.pdf","name":"floorplan.pdf","type":"application/pdf"}}' },
    { name: 'attachment1', filename: 'floorplan.pdf', type: 'application/pdf', value: '%PDF-1.4 not really a pdf, 48 bytes of test data' },
  ]);
  add({ name: 'sendgrid inbound parse', preset: 'sendgrid', scheme: 'basic', kind: 'message', channel: 'mail', path: '/hooks/mail',
    secret: 'sendgrid:parse-pass-1', headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, Authorization: basic('sendgrid', 'parse-pass-1') }, body });
}
const mgKey = 'key-3ax6xnjp29jd6fds4gc373sgvjxteol0';
function mailgunSig(timestamp, token) { return hmac('sha256', mgKey, timestamp + token).digest('hex'); }
{
  const boundary = '----MailgunBoundary7MA4YWxkTrZu0gW';
  const ts = String(T), token = 'c8b1dd2ba5c0d7b3b2c5b1b5c2f3a4e5d6c7b8a9f0e1d2c3b4';
  const body = multipart(boundary, [
    { name: 'Message-Id', value: '<20260101000000.1.ABCDEF@mg.example.com>' },
    { name: 'sender', value: 'bob@example.com' },
    { name: 'from', value: 'Bob Smith <bob@example.com>' },
    { name: 'recipient', value: 'sales@mg.example.com' },
    { name: 'subject', value: 'Re: your offer' },
    { name: 'body-plain', value: 'Yes, please go ahead.\n\n> earlier text' },
    { name: 'stripped-text', value: 'Yes, please go ahead.' },
    { name: 'attachment-count', value: '1' },
    { name: 'timestamp', value: ts },
    { name: 'token', value: token },
    { name: 'signature', value: mailgunSig(ts, token) },
    { name: 'attachment-1', filename: 'signed.png', type: 'image/png', value: '\x89PNG fake image bytes' },
  ]);
  add({ name: 'mailgun route', preset: 'mailgun', scheme: 'mailgun', kind: 'message', channel: 'mg', path: '/hooks/mg', secret: mgKey,
    headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` }, body });
  const evToken = 'ev0b1dd2ba5c0d7b3b2c5b1b5c2f3a4e5d6c7b8a9f0e1d2c3';
  const ev = JSON.stringify({ signature: { timestamp: ts, token: evToken, signature: mailgunSig(ts, evToken) },
    'event-data': { event: 'delivered', id: 'CPgfbmQMTCKtHW6uIWtuVe', timestamp: T, message: { headers: { 'message-id': '20260101.OURSEND@mg.example.com' } } } });
  add({ name: 'mailgun delivered event', preset: 'mailgun', scheme: 'mailgun', kind: 'notification', channel: 'mg', path: '/hooks/mg', secret: mgKey,
    headers: { 'Content-Type': 'application/json' }, body: ev });
}
add({ name: 'postmark inbound', preset: 'postmark', scheme: 'basic', kind: 'message', channel: 'pm', path: '/hooks/pm', secret: 'postmark:pm-pass-1',
  headers: { 'Content-Type': 'application/json', Authorization: basic('postmark', 'pm-pass-1') },
  body: JSON.stringify({ FromName: 'Postmarkapp Support', MessageStream: 'inbound', From: 'support@postmarkapp.com',
    FromFull: { Email: 'support@postmarkapp.com', Name: 'Postmarkapp Support', MailboxHash: '' },
    To: '"Firstname Lastname" <yourhash+SampleHash@inbound.postmarkapp.com>', Subject: 'Test subject',
    MessageID: '73e6d360-66eb-11e1-8e72-a8904824019b', Date: 'Thu, 1 Jan 2026 00:00:00 +0000',
    TextBody: 'This is a test text body.', StrippedTextReply: 'This is the reply text',
    Headers: [{ Name: 'Message-ID', Value: '<CAE-postmark-0001@mail.gmail.com>' }], Attachments: [] }) });

// Typeform: Typeform-Signature: sha256=<base64 HMAC of the body>. The
// optional phone question is skipped, so the answers shift by one.
{
  const secret = 'typeform-secret-abc';
  const body = JSON.stringify({ event_id: '01JGZ0000000000000000TYPEF', event_type: 'form_response', form_response: {
    form_id: 'lT4Z3j', token: 'a3a12ec67a1365927098a606107fac15', landed_at: '2026-01-01T00:00:00Z', submitted_at: '2026-01-01T00:01:00Z',
    definition: { id: 'lT4Z3j', title: 'Contact us', fields: [
      { id: 'f1', ref: 'name', type: 'short_text', title: 'Your name' },
      { id: 'f2', ref: 'phone', type: 'phone_number', title: 'Phone (optional)' },
      { id: 'f3', ref: 'email', type: 'email', title: 'Email' },
      { id: 'f4', ref: 'message', type: 'long_text', title: 'How can we help?' } ] },
    answers: [
      { type: 'text', text: 'Laura Lopez', field: { id: 'f1', type: 'short_text', ref: 'name' } },
      { type: 'email', email: 'laura@example.com', field: { id: 'f3', type: 'email', ref: 'email' } },
      { type: 'text', text: 'I would like a demo next week.', field: { id: 'f4', type: 'long_text', ref: 'message' } } ] } });
  add({ name: 'typeform response', preset: 'typeform', scheme: 'hmac-sha256', kind: 'message', channel: 'form', path: '/hooks/form', secret,
    headers: { 'Content-Type': 'application/json', 'Typeform-Signature': 'sha256=' + hmac('sha256', secret, body).digest('base64') }, body });
}

// Generic channels with one scheme each.
{
  const secret = 'whsec_test_stripe_secret_abc123';
  const body = JSON.stringify({ id: 'evt_1QaBcD2eZvKYlo2C0123abcd', object: 'event', type: 'customer.created', data: { object: { id: 'cus_1', email: 'a@example.com', name: 'Ada' } } });
  const header = Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: T });
  Stripe.webhooks.constructEvent(body, header, secret, 300, undefined, T); // throws if the SDK disagrees
  add({ name: 'stripe event', preset: 'generic', scheme: 'stripe', kind: 'message', channel: 'stripe', path: '/hooks/stripe', secret,
    headers: { 'Content-Type': 'application/json; charset=utf-8', 'Stripe-Signature': header }, body });
}
{
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const body = JSON.stringify({ id: 'lead_svix_1', from: 'svix@example.com', name: 'Sam', text: 'From a Svix sender' });
  const sig = new SvixWebhook(secret).sign('msg_2Lg1bJ2ZkZ0', new Date(T * 1000), body);
  add({ name: 'svix', preset: 'generic', scheme: 'standard-webhooks', kind: 'message', channel: 'svix', path: '/hooks/svix', secret,
    headers: { 'Content-Type': 'application/json', 'svix-id': 'msg_2Lg1bJ2ZkZ0', 'svix-timestamp': String(T), 'svix-signature': sig }, body });
  const body2 = JSON.stringify({ id: 'lead_sw_1', from: 'sw@example.com', name: 'Sue', text: 'From a Standard Webhooks sender' });
  const sig2 = new StandardWebhook(secret).sign('msg_sw_1', new Date(T * 1000), body2);
  add({ name: 'standard webhooks', preset: 'generic', scheme: 'standard-webhooks', kind: 'message', channel: 'sw', path: '/hooks/sw', secret,
    headers: { 'Content-Type': 'application/json', 'webhook-id': 'msg_sw_1', 'webhook-timestamp': String(T), 'webhook-signature': sig2 }, body: body2 });
}
async function main() {
  const { sign, verify } = await import('@octokit/webhooks-methods');
  const secret = "It's a Secret to Everybody";
  const body = JSON.stringify({ action: 'opened', issue: { id: 1347, number: 7, title: 'Found a bug', body: 'It breaks', user: { login: 'octocat' } } });
  const sig = await sign(secret, body);
  assert.ok(await verify(secret, body, sig));
  add({ name: 'github', preset: 'generic', scheme: 'hmac-sha256', encoding: 'hex', prefix: 'sha256=', header: 'X-Hub-Signature-256', kind: 'message',
    channel: 'gh', path: '/hooks/gh', secret, headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': sig, 'X-GitHub-Delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958' }, body });
  // Shopify: X-Shopify-Hmac-Sha256: <base64 HMAC of the body>, as its docs compute it with node:crypto.
  const shopSecret = 'shpss_0123456789abcdef';
  const shopBody = JSON.stringify({ id: 820982911946154508, email: 'jon@example.com', note: 'Please call me', customer: { first_name: 'Jon' } });
  add({ name: 'shopify', preset: 'generic', scheme: 'hmac-sha256', encoding: 'base64', header: 'X-Shopify-Hmac-Sha256', kind: 'message',
    channel: 'shop', path: '/hooks/shop', secret: shopSecret, headers: { 'Content-Type': 'application/json', 'X-Shopify-Hmac-Sha256': hmac('sha256', shopSecret, shopBody).digest('base64') }, body: shopBody });
  process.stdout.write(JSON.stringify({ generated_by: 'hook/testdata/vectors/gen.js', base_url: BASE, vectors }, null, 2) + '\n');
}
main().catch((e) => { console.error(e); process.exit(1); });
