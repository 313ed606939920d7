// gen.js signs the outbound event bodies handoff encodes (../bodies.json,
// written by TestWriteReferenceBodies) with the Standard Webhooks reference
// library and with Svix's, checks that each library's verifier accepts the
// other's signature, and writes the vectors the Go test compares handoff's
// own signatures with:
//
//   cd outbound/testdata/vectors && npm install && node gen.js > ../vectors.json
//
// The Go tests read only ../vectors.json: they need neither node nor npm.
'use strict';
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { Webhook: StandardWebhook } = require('standardwebhooks');
const { Webhook: SvixWebhook } = require('svix');

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const bodies = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'bodies.json'), 'utf8'));
const std = new StandardWebhook(secret);
const svix = new SvixWebhook(secret);
const vectors = bodies.map((b) => {
  const at = new Date(b.timestamp * 1000);
  const standardwebhooks = std.sign(b.id, at, b.body);
  const svixSig = svix.sign(b.id, at, b.body);
  const headers = { 'webhook-id': b.id, 'webhook-timestamp': String(b.timestamp), 'webhook-signature': standardwebhooks };
  // Verify as a receiver would, at the message's own time.
  const realNow = Date.now;
  Date.now = () => b.timestamp * 1000;
  try {
    assert.deepStrictEqual(std.verify(b.body, headers), JSON.parse(b.body));
    assert.deepStrictEqual(svix.verify(b.body, { 'svix-id': b.id, 'svix-timestamp': String(b.timestamp), 'svix-signature': svixSig }), JSON.parse(b.body));
  } finally {
    Date.now = realNow;
  }
  return { ...b, standardwebhooks, svix: svixSig };
});
process.stdout.write(JSON.stringify({ secret, vectors }, null, 2) + '\n');
