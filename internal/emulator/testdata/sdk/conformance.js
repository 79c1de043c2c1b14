// Official-SDK conformance script for the AgentMail emulator.
//
// Driven by TestSDKConformance (sdk_test.go). It uses the official Node SDK
// (npm agentmail@0.5.27, installed into SDK_DIR) against a running emulator
// and additionally re-parses every raw response and WebSocket frame with the
// SDK's own serialization schemas in strict mode (unknown keys, unknown enum
// values and unknown union members fail), so any wire mismatch fails.
//
// Environment: SDK_DIR, EMULATOR_URL (http://127.0.0.1:PORT), API_KEY.
// Protocol on stdout: "READY_FOR_SMTP <inbox>" once the WebSocket
// subscription is acknowledged (the Go test then delivers a mail over SMTP),
// and "CONFORMANCE OK" at the end. Any failure exits non-zero.
"use strict";

const path = require("node:path");
const { createRequire } = require("node:module");

const sdkRequire = createRequire(path.join(process.env.SDK_DIR, "package.json"));
const { AgentMailClient, AgentMailError } = sdkRequire("agentmail");
const S = sdkRequire("agentmail/serialization");

const baseURL = process.env.EMULATOR_URL;
const wsURL = baseURL.replace(/^http/, "ws");
const apiKey = process.env.API_KEY;

const STRICT = {
  unrecognizedObjectKeys: "fail",
  allowUnrecognizedUnionMembers: false,
  allowUnrecognizedEnumValues: false,
  skipValidation: false,
  breadcrumbsPrefix: ["response"],
};

let last = null; // the most recent raw HTTP exchange
const exchanges = [];

async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  const text = await res.text();
  last = { url: String(input), method: (init && init.method) || "GET", status: res.status, text };
  exchanges.push(last);
  return new Response(res.status === 204 ? null : text, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
}

function fail(msg) {
  throw new Error(msg);
}

function assert(cond, msg) {
  if (!cond) fail("assertion failed: " + msg);
}

// strict re-parses the last raw response body with a serialization schema.
function strict(schema, label, text = last && last.text) {
  const raw = JSON.parse(text);
  const res = schema.parse(raw, STRICT);
  if (!res.ok) {
    fail(`${label}: wire mismatch: ${JSON.stringify(res.errors)}\nbody: ${text}`);
  }
  return raw;
}

function expectStatus(code, label) {
  assert(last && last.status === code, `${label}: want HTTP ${code}, got ${last && last.status}: ${last && last.text}`);
}

async function expectError(promise, status, code, label) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof AgentMailError, `${label}: want AgentMailError, got ${e}`);
    assert(e.statusCode === status, `${label}: want status ${status}, got ${e.statusCode}`);
    const raw = strict(S.ErrorResponse, label + " error body");
    assert(raw.code === code, `${label}: want code ${code}, got ${raw.code}`);
    return;
  }
  fail(`${label}: expected an error`);
}

async function main() {
  const client = new AgentMailClient({
    apiKey,
    environment: { http: baseURL, websockets: wsURL },
    fetch: recordingFetch,
    maxRetries: 0,
  });

  // Key scope.
  const me = await client.auth.me();
  strict(S.Identity, "auth.me");
  assert(me.scopeType === "organization", "auth.me scope_type");

  // Inboxes: create (with client_id idempotency), list with pagination, get.
  const a = await client.inboxes.create({ username: "sdk-a", displayName: "SDK Agent", clientId: "sdk-a" });
  strict(S.inboxes.Inbox, "inboxes.create");
  const again = await client.inboxes.create({ username: "sdk-a-other", clientId: "sdk-a" });
  assert(again.inboxId === a.inboxId, "client_id idempotency returns the original inbox");
  const b = await client.inboxes.create({ username: "sdk-b" });
  const c = await client.inboxes.create({});
  strict(S.inboxes.Inbox, "inboxes.create (random username)");
  const seen = new Set();
  let pageToken;
  let pages = 0;
  do {
    const page = await client.inboxes.list({ limit: 2, pageToken });
    strict(S.inboxes.ListInboxesResponse, "inboxes.list");
    assert(page.count === page.inboxes.length, "count equals page size");
    for (const ib of page.inboxes) {
      assert(!seen.has(ib.inboxId), "no duplicates across pages");
      seen.add(ib.inboxId);
    }
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken && pages < 10);
  assert(pages === 2, `two pages of inboxes, got ${pages}`);
  for (const ib of [a, b, c]) assert(seen.has(ib.inboxId), "listed " + ib.inboxId);
  const got = await client.inboxes.get(a.inboxId);
  strict(S.inboxes.Inbox, "inboxes.get");
  assert(got.email === a.inboxId && got.displayName === "SDK Agent", "inboxes.get fields");
  await client.inboxes.search({ q: "sdk" });
  strict(S.inboxes.SearchInboxesResponse, "inboxes.search");
  await expectError(client.inboxes.get("missing@agentmail.to"), 404, "not_found", "inboxes.get missing");

  // Send (idempotent) from A to B, with an attachment.
  const attachmentText = "hello attachment";
  const sendReq = {
    to: [b.inboxId],
    subject: "Hello from the SDK",
    text: "Hi B",
    html: "<p>Hi B</p>",
    labels: ["Outreach"],
    attachments: [{ filename: "note.txt", contentType: "text/plain", content: Buffer.from(attachmentText).toString("base64") }],
  };
  const sent = await client.inboxes.messages.send(a.inboxId, sendReq, { idempotencyKey: "sdk-send-1" });
  strict(S.SendMessageResponse, "messages.send");
  const replay = await client.inboxes.messages.send(a.inboxId, sendReq, { idempotencyKey: "sdk-send-1" });
  assert(replay.messageId === sent.messageId && replay.threadId === sent.threadId, "idempotent replay");
  await expectError(
    client.inboxes.messages.send(a.inboxId, { ...sendReq, text: "different" }, { idempotencyKey: "sdk-send-1" }),
    409, "conflict", "idempotency conflict");
  await expectError(client.inboxes.messages.send(a.inboxId, { subject: "nobody" }), 422, "unprocessable", "send without recipients");

  // B received it; list with pagination, get, labels.
  for (let i = 0; i < 3; i++) {
    await client.inboxes.messages.send(a.inboxId, { to: b.inboxId, subject: `Filler ${i}`, text: `filler ${i}` });
  }
  const ids = [];
  pageToken = undefined;
  pages = 0;
  let prev = null;
  do {
    const page = await client.inboxes.messages.list(b.inboxId, { limit: 3, pageToken });
    strict(S.ListMessagesResponse, "messages.list");
    for (const m of page.messages) {
      if (prev) assert(prev >= m.timestamp.getTime(), "messages ordered by timestamp descending");
      prev = m.timestamp.getTime();
      ids.push(m.messageId);
    }
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken && pages < 10);
  assert(ids.length === 4 && pages === 2, `4 messages on 2 pages, got ${ids.length} on ${pages}`);
  assert(ids.includes(sent.messageId), "received copy keeps the Message-ID");
  await client.inboxes.messages.list(b.inboxId, { labels: ["received", "unread"], ascending: true });
  strict(S.ListMessagesResponse, "messages.list with labels");
  assert(JSON.parse(last.text).count === 4, "labels filter (JSON-array query form)");

  const received = await client.inboxes.messages.get(b.inboxId, sent.messageId);
  strict(S.Message, "messages.get");
  assert(received.labels.includes("received") && received.labels.includes("unread"), "received labels");
  assert(received.subject === sendReq.subject && received.text === "Hi B", "received content");
  assert(received.attachments && received.attachments.length === 1, "received attachment");
  const upd = await client.inboxes.messages.update(b.inboxId, sent.messageId, { addLabels: ["Important"], removeLabels: "unread" });
  strict(S.UpdateMessageResponse, "messages.update");
  assert(upd.labels.includes("important") && !upd.labels.includes("unread"), "label update");

  // Attachment locator and download.
  const att = await client.inboxes.messages.getAttachment(b.inboxId, sent.messageId, received.attachments[0].attachmentId);
  strict(S.AttachmentResponse, "messages.getAttachment");
  const dl = await fetch(att.downloadUrl);
  assert(dl.status === 200 && (await dl.text()) === attachmentText, "attachment download");

  // Reply from B; A sees the reply in the same thread.
  const reply = await client.inboxes.messages.reply(b.inboxId, sent.messageId, { text: "Thanks A\n\nOn Monday A wrote:\n> Hi B" }, { idempotencyKey: "sdk-reply-1" });
  strict(S.SendMessageResponse, "messages.reply");
  const thread = await client.inboxes.threads.get(a.inboxId, sent.threadId);
  strict(S.Thread, "threads.get");
  assert(thread.messageCount === 2 && thread.messages.length === 2, `thread has 2 messages, got ${thread.messages.length}`);
  assert(thread.messages[0].messageId === sent.messageId, "thread messages ascending");
  assert(thread.messages[1].messageId === reply.messageId, "reply joined the sender's thread");
  assert(thread.messages[1].inReplyTo === sent.messageId, "in_reply_to");
  assert(thread.messages[1].extractedText === "Thanks A", `extracted_text, got ${JSON.stringify(thread.messages[1].extractedText)}`);
  await client.inboxes.threads.list(a.inboxId, { limit: 10 });
  strict(S.ListThreadsResponse, "threads.list");
  await client.threads.list({ limit: 1 });
  strict(S.ListThreadsResponse, "org threads.list");
  await client.inboxes.threads.getAttachment(a.inboxId, sent.threadId, thread.messages[0].attachments[0].attachmentId);
  strict(S.AttachmentResponse, "threads.getAttachment");
  await client.inboxes.messages.replyAll(a.inboxId, reply.messageId, { text: "all" });
  strict(S.SendMessageResponse, "messages.replyAll");
  await client.inboxes.messages.forward(a.inboxId, reply.messageId, { to: "someone@example.com" });
  strict(S.SendMessageResponse, "messages.forward");

  // Inbox API key: create, list, use, delete.
  const key = await client.inboxes.apiKeys.create(a.inboxId, {
    name: "runtime",
    permissions: { inboxRead: true, messageRead: true, messageSend: true, webhookRead: true, webhookCreate: true, webhookDelete: true },
  });
  strict(S.CreateApiKeyResult, "inboxes.apiKeys.create");
  assert(key.apiKey.startsWith("am_") && key.inboxId === a.inboxId, "inbox key fields");
  await client.inboxes.apiKeys.list(a.inboxId);
  strict(S.ListApiKeysResponse, "inboxes.apiKeys.list");
  await client.apiKeys.list();
  strict(S.ListApiKeysResponse, "apiKeys.list");
  const scoped = new AgentMailClient({ apiKey: key.apiKey, environment: { http: baseURL, websockets: wsURL }, fetch: recordingFetch, maxRetries: 0 });
  const scopedMe = await scoped.auth.me();
  strict(S.Identity, "auth.me (inbox key)");
  assert(scopedMe.scopeType === "inbox" && scopedMe.inboxId === a.inboxId, "inbox key identity");
  await expectError(scoped.inboxes.get(b.inboxId), 404, "not_found", "out-of-scope inbox");
  await expectError(scoped.inboxes.messages.update(a.inboxId, sent.messageId, { addLabels: ["x"] }), 403, "missing_permission", "missing permission");
  await client.inboxes.apiKeys.delete(a.inboxId, key.apiKeyId);
  expectStatus(204, "inboxes.apiKeys.delete");

  // Webhooks: inbox-scoped and org-wide.
  const wh = await client.inboxes.webhooks.create(a.inboxId, {
    url: "https://hooks.example.invalid/agentmail",
    eventTypes: ["message.received", "message.sent", "message.delivered"],
    clientId: "sdk-webhook",
  });
  strict(S.webhooks.Webhook, "inboxes.webhooks.create");
  assert(wh.secret.startsWith("whsec_"), "webhook secret");
  const whAgain = await client.inboxes.webhooks.create(a.inboxId, { url: "https://other.invalid/", eventTypes: ["message.sent"], clientId: "sdk-webhook" });
  assert(whAgain.webhookId === wh.webhookId, "webhook client_id idempotency");
  await client.inboxes.webhooks.list(a.inboxId);
  strict(S.webhooks.ListWebhooksResponse, "inboxes.webhooks.list");
  const orgWh = await client.webhooks.create({ url: "https://hooks.example.invalid/org", eventTypes: ["message.bounced"] });
  strict(S.webhooks.Webhook, "webhooks.create");
  await client.webhooks.list();
  strict(S.webhooks.ListWebhooksResponse, "webhooks.list");
  await client.inboxes.webhooks.delete(a.inboxId, wh.webhookId);
  expectStatus(204, "inboxes.webhooks.delete");
  await client.webhooks.delete(orgWh.webhookId);
  expectStatus(204, "webhooks.delete");

  // Domains.
  await client.domains.create({ domain: "sdk-example.com" });
  strict(S.Domain, "domains.create");
  await client.domains.list();
  strict(S.ListDomainsResponse, "domains.list");
  const dom = await client.domains.get("sdk-example.com");
  strict(S.Domain, "domains.get");
  assert(dom.status === "NOT_STARTED" && dom.records.length > 0, "domain status and records");
  await client.organizations.get();
  strict(S.organizations.Organization, "organizations.get");

  // WebSocket: subscribe, then receive message.received after an SMTP delivery.
  const socket = await client.websockets.connect();
  const frames = [];
  let waiter = null;
  socket.socket.addEventListener("message", (ev) => {
    const text = typeof ev.data === "string" ? ev.data : Buffer.from(ev.data).toString("utf8");
    frames.push(text);
    if (waiter) waiter();
  });
  async function nextFrame(pred, label) {
    const deadline = Date.now() + 20000;
    for (;;) {
      const i = frames.findIndex((f) => pred(JSON.parse(f)));
      if (i >= 0) return frames.splice(i, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0) fail(`timed out waiting for ${label}; frames: ${frames.join("\n")}`);
      await new Promise((resolve) => {
        waiter = resolve;
        setTimeout(resolve, Math.min(left, 200));
      });
    }
  }
  socket.sendSubscribe({ type: "subscribe", eventTypes: ["message.received"], inboxIds: [a.inboxId] });
  const ack = await nextFrame((f) => f.type === "subscribed", "subscribed");
  strict(S.WebsocketsSocketResponse, "websocket subscribed", ack);
  assert(JSON.parse(ack).inbox_ids[0] === a.inboxId, "subscribed echoes inbox_ids");

  process.stdout.write(`READY_FOR_SMTP ${a.inboxId}\n`);
  const evText = await nextFrame((f) => f.type === "event" && f.message && f.message.subject === "SMTP hello", "message.received");
  strict(S.WebsocketsSocketResponse, "websocket event", evText);
  const ev = JSON.parse(evText);
  assert(ev.event_type === "message.received", "event_type");
  assert(ev.message.inbox_id === a.inboxId && ev.thread.inbox_id === a.inboxId, "event inbox");
  assert(ev.message.labels.includes("received") && ev.message.labels.includes("unread"), "event labels");
  socket.close();

  process.stdout.write(`CONFORMANCE OK (${exchanges.length} HTTP exchanges)\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write((err && err.stack) || String(err));
    process.stderr.write("\n");
    if (last) process.stderr.write(`last exchange: ${last.method} ${last.url} -> ${last.status}: ${last.text}\n`);
    process.exit(1);
  },
);
