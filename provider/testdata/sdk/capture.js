// capture.js records the requests the providers' own SDKs send, so the
// Go tests can check handoff's request shapes against them without npm.
//
//   cd provider/testdata/sdk && npm install && node capture.js
//
// It starts a local server that answers as each API documents, points each
// SDK at it, and writes one <provider>.json per SDK: method, path, the
// headers that matter and the body as sent. WhatsApp has no maintained
// official Node SDK (the npm "whatsapp" package is an empty placeholder),
// so its file is written from the Cloud API reference and marked so; so is
// meta.json, from the Messenger Platform's Send API reference (Meta ships no
// maintained Node SDK for it either). This script writes neither.
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");

const keep = ["authorization", "content-type", "accept", "user-agent"];
let captured = [];

const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    const headers = {};
    for (const h of keep) if (req.headers[h] !== undefined) headers[h] = req.headers[h];
    captured.push({ method: req.method, path: req.url, headers, body });
    res.setHeader("Content-Type", "application/json");
    if (req.url.includes("/Messages.json")) {
      res.statusCode = 201;
      res.end(JSON.stringify({ sid: "SM00000000000000000000000000000001", status: "queued" }));
    } else if (req.url.includes("chat.postMessage")) {
      res.end(JSON.stringify({ ok: true, channel: "C123", ts: "1700000000.000100", message: { text: "hi" } }));
    } else if (req.url.includes("/sendMessage")) {
      res.end(JSON.stringify({ ok: true, result: { message_id: 42, chat: { id: 12345, type: "private" }, date: 1700000000, text: "Thanks, we will call you today." } }));
    } else {
      res.statusCode = 404;
      res.end("{}");
    }
  });
});

function take() {
  const c = captured;
  captured = [];
  if (c.length !== 1) throw new Error(`want 1 request, got ${c.length}`);
  return c[0];
}

function write(name, sdk, req) {
  // The SDK's version string in its User-Agent changes with every release;
  // keep it, since it names what produced the file.
  fs.writeFileSync(path.join(__dirname, name + ".json"), JSON.stringify({ sdk, request: req }, null, 2) + "\n");
}

async function main() {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${server.address().port}`;
  const text = "Thanks, we will call you today.";

  // Twilio: the SDK builds https://api.twilio.com/...; its RequestClient
  // honours the edge/region, so we swap the host in a custom http client.
  const twilio = require("twilio");
  const tw = twilio("ACaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "auth-token-123", {
    httpClient: new (class extends twilio.RequestClient {
      request(opts) {
        opts.uri = opts.uri.replace("https://api.twilio.com", base);
        return super.request(opts);
      }
    })(),
  });
  await tw.messages.create({
    to: "+15550002222", from: "+15550001111", body: text,
    statusCallback: "https://handoff.example/hooks/sms?ref=c1%3A01HZ",
  });
  write("twilio", "twilio@" + require("twilio/package.json").version, take());

  const { WebClient } = require("@slack/web-api");
  const slack = new WebClient("xoxb-test-token", { slackApiUrl: base + "/api/", retryConfig: { retries: 0 } });
  await slack.chat.postMessage({ channel: "C123", text });
  write("slack", "@slack/web-api@" + require("@slack/web-api/package.json").version, take());

  const { Api } = require("grammy");
  const tg = new Api("123456:TEST-token", { apiRoot: base });
  await tg.sendMessage(12345, text);
  write("telegram", "grammy@" + require("./package.json").dependencies.grammy, take());

  server.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
