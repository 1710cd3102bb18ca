// Drives the gateway's chat interfaces with the official clients, as an
// application developer would: the `openai` package against
// /v1/chat/completions and /v1/models, and the `ai` package's
// DefaultChatTransport and readUIMessageStream against /v1/chat and
// /v1/runs/{run_id}/ui-stream. chatapi_test.go starts the suite and runs
// this script; it prints "PASS chatapi" when every check held.
//
// Environment: BAAGENT_URL (the gateway's HTTP base URL), BAAGENT_API_KEY,
// BAAGENT_MODEL (the model GET /v1/models must list).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const base = process.env.BAAGENT_URL;
const key = process.env.BAAGENT_API_KEY;
const model = process.env.BAAGENT_MODEL;
assert.ok(base && key && model, 'BAAGENT_URL, BAAGENT_API_KEY and BAAGENT_MODEL are required');

const simple = 'Which product category had the highest revenue last quarter?';
const clarify = 'Chatapi test: compare revenue across two periods, asking me which.';

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 120_000 });

// The events of one turn: contiguous seqs, each once.
function checkEvents(events, what) {
  assert.ok(events.length > 0, `${what}: no events`);
  for (let i = 1; i < events.length; i++) {
    assert.equal(Number(events[i].seq), Number(events[i - 1].seq) + 1, `${what}: seq ${events[i].seq} follows ${events[i - 1].seq}`);
    assert.equal(events[i].cursor, String(events[i].seq), `${what}: cursor of seq ${events[i].seq}`);
  }
}

async function getRun(runId) {
  const resp = await fetch(`${base}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(resp.status, 200, `GET /v1/runs/${runId}`);
  return (await resp.json()).run;
}

async function models() {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.ok(ids.includes(model), `GET /v1/models lists ${model}: ${ids}`);
  console.log('ok models', ids.join(','));
}

async function nonStreaming() {
  const { data, response } = await client.chat.completions
    .create({ model, messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: simple }] })
    .withResponse();
  assert.equal(data.object, 'chat.completion');
  const msg = data.choices[0].message;
  assert.equal(msg.role, 'assistant');
  assert.match(msg.content, /2026-Q3/, 'the final answer');
  assert.ok(msg.reasoning_content && msg.reasoning_content.length > 0, 'thoughts as reasoning_content');
  assert.equal(data.choices[0].finish_reason, 'stop');
  const b = data.baagent;
  assert.ok(b.run_id && b.conversation_id, 'baagent run and conversation');
  assert.equal(response.headers.get('x-baagent-conversation-id'), b.conversation_id);
  checkEvents(b.events, 'non-streaming');
  assert.equal(Number(b.events[0].seq), 1);
  assert.equal(b.events[0].type, 'start');
  assert.equal(b.events.at(-1).type, 'complete');
  assert.ok(b.events.some((e) => e.type === 'act' && e.act.tool_name === 'sql_query'), 'the tool call is among the events');
  assert.equal(b.cursor, b.events.at(-1).cursor);
  assert.ok(data.usage.total_tokens > 0, 'usage');
  const run = await getRun(b.run_id);
  assert.equal(run.state, 'RUN_STATE_COMPLETED');
  assert.equal(run.labels.interface, 'openai');
  console.log('ok non-streaming', b.run_id);
}

async function streaming() {
  const stream = await client.chat.completions.create({
    model, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: simple }],
  });
  let content = '', reasoning = '', finish = null, usage = null, runId = '';
  const events = [];
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    runId ||= chunk.baagent?.run_id;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? '';
    reasoning += choice.delta.reasoning_content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
    if (chunk.baagent?.event) events.push(chunk.baagent.event);
  }
  assert.match(content, /2026-Q3/, 'streamed content');
  assert.ok(reasoning.length > 0, 'streamed reasoning_content');
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.total_tokens > 0, 'usage chunk');
  checkEvents(events, 'streaming');
  assert.equal(events[0].type, 'start');
  assert.equal(events.at(-1).type, 'complete');
  assert.ok(runId);
  console.log('ok streaming', runId);
}

async function clarification(stream) {
  // The run asks which periods: the completion ends with the question.
  const first = await client.chat.completions.create({ model, messages: [{ role: 'user', content: clarify }] });
  const pending = first.baagent.pending_input;
  assert.ok(pending, 'pending_input');
  assert.equal(pending.kind, 'clarification');
  assert.match(first.choices[0].message.content, /Which periods/);
  assert.equal(first.choices[0].finish_reason, 'stop');
  assert.equal(first.baagent.state, 'waiting_input');
  const conv = first.baagent.conversation_id;
  const answer = pending.options[1];
  const messages = [
    { role: 'user', content: clarify },
    { role: 'assistant', content: first.choices[0].message.content },
    { role: 'user', content: answer },
  ];
  // The next request in the conversation answers it: the same run goes on.
  let content = '', runId = '';
  const events = [];
  if (stream) {
    const s = await client.chat.completions.create({ model, messages, stream: true, metadata: { conversation_id: conv } });
    for await (const chunk of s) {
      runId ||= chunk.baagent?.run_id;
      content += chunk.choices[0]?.delta.content ?? '';
      if (chunk.baagent?.event) events.push(chunk.baagent.event);
    }
  } else {
    const second = await client.chat.completions.create({ model, messages }, { headers: { 'X-Baagent-Conversation-Id': conv } });
    content = second.choices[0].message.content;
    runId = second.baagent.run_id;
    events.push(...second.baagent.events);
    assert.equal(second.baagent.conversation_id, conv);
  }
  assert.equal(runId, first.baagent.run_id, 'the answer continues the waiting run');
  assert.ok(content.includes(answer), `the answer (${answer}) is used: ${content}`);
  checkEvents(events, 'answered');
  assert.equal(Number(events[0].seq), Number(first.baagent.cursor) + 1, 'the answered turn continues after the question');
  assert.ok(events.some((e) => e.type === 'clarification_answered'), `clarification_answered among ${events.map((e) => e.type)}`);
  assert.equal(events.at(-1).type, 'complete');
  console.log('ok clarification', stream ? 'streaming' : 'non-streaming', runId);
}

async function idempotency() {
  const opts = { headers: { 'Idempotency-Key': `chatapi-${Date.now()}` } };
  const a = await client.chat.completions.create({ model, messages: [{ role: 'user', content: simple }] }, opts);
  const b = await client.chat.completions.create({ model, messages: [{ role: 'user', content: simple }] }, opts);
  assert.equal(a.baagent.run_id, b.baagent.run_id, 'the same Idempotency-Key is the same run');
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  console.log('ok idempotency', a.baagent.run_id);
}

async function expectError(promise, status, code) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `an APIError: ${err}`);
    assert.equal(err.status, status, `status of ${err.message}`);
    if (code) assert.equal(err.code, code);
    assert.ok(err.error && err.error.message && err.error.type, 'OpenAI error shape');
    return err;
  }
  assert.fail(`expected HTTP ${status}`);
}

async function errors() {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-a-key-0123456789', maxRetries: 0 });
  await expectError(bad.chat.completions.create({ model, messages: [{ role: 'user', content: simple }] }), 401, 'invalid_api_key');
  await expectError(client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: simple }] }), 404, 'model_not_found');
  const e = await expectError(client.chat.completions.create({ model, messages: [{ role: 'assistant', content: 'hi' }] }), 400);
  assert.equal(e.param, 'messages');
  await expectError(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }, { headers: { 'X-Baagent-Conversation-Id': '../etc' } }), 400);
  console.log('ok errors 401 404 400');
}

// After the other checks: invalid keys from this address are throttled
// (the suite runs with a failure limit of 3), so the next call is 429.
async function rateLimited() {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-a-key-0123456789', maxRetries: 0 });
  for (let i = 0; i < 10; i++) {
    try {
      await bad.models.list();
    } catch (err) {
      if (err.status === 429) {
        assert.equal(err.error.type, 'rate_limit_error');
        assert.ok(err.headers.get('retry-after'), 'Retry-After');
        console.log('ok errors 429');
        return;
      }
      assert.equal(err.status, 401);
    }
  }
  assert.fail('never throttled');
}

const transport = (extra = {}) =>
  new DefaultChatTransport({ api: `${base}/v1/chat`, headers: { authorization: `Bearer ${key}` }, ...extra });

async function lastMessage(stream) {
  const errs = [];
  let last;
  for await (const m of readUIMessageStream({ stream, onError: (e) => errs.push(e), terminateOnError: true })) last = m;
  assert.deepEqual(errs, [], 'no stream errors');
  assert.ok(last, 'a message');
  return last;
}

const eventsOf = (msg) => msg.parts.filter((p) => p.type === 'data-baagent').map((p) => p.data);

async function aisdk() {
  const chatId = `chatapi-${Date.now()}`;
  const messages = [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: simple }] }];
  const stream = await transport().sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
  const msg = await lastMessage(stream);
  const text = msg.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.match(text, /2026-Q3/);
  assert.ok(msg.parts.some((p) => p.type === 'reasoning' && p.text.length > 0), 'a reasoning part');
  const tool = msg.parts.find((p) => p.type === 'dynamic-tool');
  assert.ok(tool, `a tool part: ${msg.parts.map((p) => p.type)}`);
  assert.equal(tool.toolName, 'sql_query');
  assert.equal(tool.state, 'output-available');
  assert.ok(msg.parts.some((p) => p.type === 'data-cost'), 'a cost part');
  const events = eventsOf(msg);
  checkEvents(events, 'ui stream');
  assert.equal(events[0].type, 'start');
  assert.equal(events.at(-1).type, 'complete');
  assert.equal(msg.metadata.conversation_id, chatId, 'the chat id is the conversation');
  const runId = msg.metadata.run_id;
  assert.equal((await getRun(runId)).labels.interface, 'aisdk');

  // useChat's own reconnect (GET /v1/chat/{id}/stream): nothing in progress.
  assert.equal(await transport().reconnectToStream({ chatId }), null, 'no run in progress: 204');

  // Resume the same run from a cursor in the middle.
  const cut = events[Math.floor(events.length / 2)];
  const again = await transport({
    prepareReconnectToStreamRequest: () => ({ api: `${base}/v1/runs/${runId}/ui-stream?cursor=${cut.cursor}` }),
  }).reconnectToStream({ chatId });
  assert.ok(again, 'a resumed stream');
  const resumed = eventsOf(await lastMessage(again));
  assert.equal(Number(resumed[0].seq), Number(cut.seq) + 1, 'resumed after the cursor');
  assert.deepEqual(resumed.map((e) => e.seq), events.slice(events.indexOf(cut) + 1).map((e) => e.seq));
  console.log('ok aisdk', runId, 'resumed after', cut.cursor);

  // A clarification over the UI stream, answered by the next message.
  const chat2 = `chatapi-hitl-${Date.now()}`;
  const q = await lastMessage(await transport().sendMessages({
    chatId: chat2, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: clarify }] }],
  }));
  const pending = q.parts.find((p) => p.type === 'data-pending-input');
  assert.ok(pending, 'a pending-input part');
  const answer = pending.data.options[0];
  const done = await lastMessage(await transport().sendMessages({
    chatId: chat2, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
    messages: [
      { id: 'u1', role: 'user', parts: [{ type: 'text', text: clarify }] },
      q,
      { id: 'u2', role: 'user', parts: [{ type: 'text', text: answer }] },
    ],
  }));
  assert.equal(done.metadata.run_id, q.metadata.run_id);
  assert.ok(done.parts.filter((p) => p.type === 'text').map((p) => p.text).join('').includes(answer));
  console.log('ok aisdk clarification', done.metadata.run_id);
}

await models();
await nonStreaming();
await streaming();
await clarification(false);
await clarification(true);
await idempotency();
await aisdk();
await errors();
await rateLimited();
console.log('PASS chatapi');
