// The official openai npm client against cmd/toolrelay-fake (path in
// TOOLRELAY_FAKE): the flows of the services' documentation, driven the way
// a JavaScript program would. Any deviation the SDK notices fails a test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, setGlobalDispatcher } from 'undici';
import OpenAI from 'openai';

const fakeBinary = process.env.TOOLRELAY_FAKE;
if (!fakeBinary) throw new Error('TOOLRELAY_FAKE must name the built cmd/toolrelay-fake');
const testdata = new URL('../../testdata/', import.meta.url);

// startFake runs the fake for backend with script (a file of testdata/, or
// a script object), and returns its settings (BASE_URL, OPENAI_BASE_URL,
// CERT) and a stop function.
function startFake(backend, script) {
  let path;
  let cleanup = () => {};
  if (typeof script === 'string') {
    path = new URL(script, testdata).pathname;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'toolrelay-js-'));
    path = join(dir, 'script.json');
    writeFileSync(path, JSON.stringify(script));
    cleanup = () => rmSync(dir, { recursive: true, force: true });
  }
  const child = spawn(fakeBinary, ['-backend', backend, '-script', path, '-addr', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const settings = {};
    const want = backend === 'openai' ? 1 : 3;
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`fake exited with ${code} before it was ready`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const lines = out.split('\n').filter((l) => l.includes('='));
      for (const l of lines) {
        const i = l.indexOf('=');
        settings[l.slice(0, i)] = l.slice(i + 1);
      }
      if (Object.keys(settings).length >= want) {
        resolve({ ...settings, stop: () => { child.kill('SIGTERM'); cleanup(); } });
      }
    });
  });
}

// Local functions of the weather flow.
const weather = {
  getUserFavoriteCity: () => 'Seattle, WA',
  getCityNickname: ({ location }) => (location === 'Seattle, WA' ? 'The Emerald City' : 'unknown'),
  getCurrentWeatherAtLocation: ({ location }) => (location === 'Seattle, WA' ? '70f' : 'unknown'),
};
const weatherAnswer = 'Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f.';
const weatherTools = [
  { type: 'function', name: 'getUserFavoriteCity', description: "Gets the user's favorite city.", parameters: { type: 'object', properties: {} } },
  { type: 'function', name: 'getCityNickname', description: "Gets a city's nickname.", parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } },
  { type: 'function', name: 'getCurrentWeatherAtLocation', description: 'Gets the weather.', parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } },
];

// foundryClient returns an openai client for the Foundry fake's OpenAI
// routes, trusting its certificate.
function foundryClient(fake) {
  setGlobalDispatcher(new Agent({ connect: { ca: readFileSync(fake.CERT) } }));
  return new OpenAI({ apiKey: 'any-token', baseURL: fake.OPENAI_BASE_URL, maxRetries: 0 });
}

test('sessions: the helper flow with tool handlers and finalResult', async (t) => {
  const fake = await startFake('openai', 'weather.json');
  t.after(fake.stop);
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: fake.BASE_URL, maxRetries: 0 });
  const agent = await client.beta.agents.create({ model: 'gpt-5', instructions: 'You are a weather bot.', tools: weatherTools });
  const calls = [];
  const handlers = Object.fromEntries(Object.entries(weather).map(([name, f]) => [name, (args) => { calls.push(name); return f(args); }]));
  const stream = await client.beta.agents.sessions.create({
    agent_id: agent.id, environment: { type: 'none' }, stream: true, toolHandlers: handlers,
    input: "What's the weather like in my favorite city?",
  });
  const result = await stream.finalResult();
  assert.deepEqual(calls, ['getUserFavoriteCity', 'getCityNickname', 'getCurrentWeatherAtLocation']);
  assert.match(JSON.stringify(result), /The Emerald City/);
});

test('sessions: the manual flow (required actions, tool results, items)', async (t) => {
  const fake = await startFake('openai', 'weather.json');
  t.after(fake.stop);
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: fake.BASE_URL, maxRetries: 0 });
  const agent = await client.beta.agents.create({ model: 'gpt-5', tools: weatherTools });
  let session = await client.beta.agents.sessions.create({
    agent_id: agent.id, environment: { type: 'none' },
    input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: "What's the weather like in my favorite city?" }] }],
  });
  for (let i = 0; i < 100 && session.status !== 'idle'; i++) {
    if (session.status === 'requires_action') {
      const events = session.required_actions.map((a) => ({
        type: 'agent.session.input.tool_result', turn_id: a.turn_id, call_id: a.call_id, success: true,
        output: weather[a.name](typeof a.arguments === 'string' ? JSON.parse(a.arguments || '{}') : (a.arguments ?? {})),
      }));
      await client.beta.agents.sessions.events.create(session.id, { events });
    } else {
      await new Promise((r) => setTimeout(r, 20));
    }
    session = await client.beta.agents.sessions.retrieve(session.id);
  }
  assert.equal(session.status, 'idle');
  const items = [];
  for await (const item of client.beta.agents.sessions.items.list(session.id)) items.push(item);
  const last = items.filter((i) => i.type === 'message' && i.role === 'assistant').at(-1);
  assert.ok(last, 'an assistant message');
  assert.match(JSON.stringify(last.content), /The Emerald City/);
});

test('responses: the history-resend loop of the tool runner', async (t) => {
  const fake = await startFake('foundry', 'weather.json');
  t.after(fake.stop);
  const client = foundryClient(fake);
  const { ResponsesToolRunner } = await import('openai/helpers/responses-tool-runner');
  const functions = weatherTools.map((tool) => ({ tool, execute: (args) => weather[tool.name](args) }));
  const runner = new ResponsesToolRunner({ functions });
  const response = await runner.run(client, { model: 'gpt-4.1-mini', input: "What's the weather like in my favorite city?" });
  assert.equal(response.output_text, weatherAnswer);
});

test('responses: a manual loop that resends the whole history, store false', async (t) => {
  const fake = await startFake('foundry', 'weather.json');
  t.after(fake.stop);
  const client = foundryClient(fake);
  const input = [{ role: 'user', content: "What's the weather like in my favorite city?" }];
  let response;
  for (let i = 0; i < 10; i++) {
    response = await client.responses.create({ model: 'gpt-4.1-mini', input, tools: weatherTools, store: false });
    assert.equal(response.store, false);
    assert.equal(response.tools.length, weatherTools.length);
    const calls = response.output.filter((o) => o.type === 'function_call');
    if (calls.length === 0) break;
    input.push(...response.output);
    for (const c of calls) input.push({ type: 'function_call_output', call_id: c.call_id, output: weather[c.name](JSON.parse(c.arguments)) });
  }
  assert.equal(response.output_text, weatherAnswer);
});

test('foundry: a conversation loop with agent_reference', async (t) => {
  const fake = await startFake('foundry', 'weather.json');
  t.after(fake.stop);
  const client = foundryClient(fake);
  // The agent version, with the project's REST API (not in the openai SDK).
  const res = await fetch(`${fake.BASE_URL}/agents/weather-bot/versions?api-version=v1`, {
    method: 'POST', headers: { authorization: 'Bearer any-token', 'content-type': 'application/json' },
    body: JSON.stringify({ definition: { kind: 'prompt', model: 'gpt-4.1-mini', instructions: 'You are a weather bot.', tools: weatherTools } }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const version = await res.json();
  const conversation = await client.conversations.create({ items: [{ type: 'message', role: 'user', content: "What's the weather like in my favorite city?" }] });
  const agent = { agent_reference: { type: 'agent_reference', name: 'weather-bot', version: version.version } };
  let response = await client.responses.create({ conversation: conversation.id, ...agent });
  for (let i = 0; i < 10; i++) {
    const calls = response.output.filter((o) => o.type === 'function_call');
    if (calls.length === 0) break;
    const input = calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: weather[c.name](JSON.parse(c.arguments)) }));
    response = await client.responses.create({ conversation: conversation.id, input, ...agent });
  }
  assert.equal(response.output_text, weatherAnswer);
});

test('sessions: an agent keeps the metadata it is created and updated with', async (t) => {
  const fake = await startFake('openai', 'weather.json');
  t.after(fake.stop);
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: fake.BASE_URL, maxRetries: 0 });
  const agent = await client.beta.agents.create({ model: 'gpt-5', tools: weatherTools, metadata: { team: 'support' } });
  assert.deepEqual(agent.metadata, { team: 'support' });
  const updated = await client.beta.agents.update(agent.id, { metadata: { team: 'billing', tier: '2' } });
  assert.deepEqual(updated.metadata, { team: 'billing', tier: '2' });
  await client.beta.agents.update(agent.id, { instructions: 'Be brief.' });
  assert.deepEqual((await client.beta.agents.retrieve(agent.id)).metadata, { team: 'billing', tier: '2' });
  await assert.rejects(client.beta.agents.update(agent.id, { metadata: { k: 'v'.repeat(513) } }), (err) => err.status === 400);
});

// A strict json_schema text.format, and answers that keep to it or not.
const signFormat = {
  type: 'json_schema', name: 'sign', strict: true,
  schema: { type: 'object', properties: { sign: { type: 'string' } }, required: ['sign'], additionalProperties: false },
};

test('responses: text.format json_schema is echoed; under strict, an answer off the schema fails the response', async (t) => {
  const fake = await startFake('responses', { turns: [{ steps: [{ text: '{"sign":"Aquarius"}' }] }, { steps: [{ text: '{"sign":3}' }] }] });
  t.after(fake.stop);
  setGlobalDispatcher(new Agent({ connect: { ca: readFileSync(fake.CERT) } }));
  const client = new OpenAI({ apiKey: 'any-token', baseURL: fake.BASE_URL, maxRetries: 0 });
  const first = await client.responses.create({ model: 'gpt-4.1-mini', input: 'My sign?', text: { format: signFormat } });
  assert.equal(first.status, 'completed');
  assert.deepEqual(JSON.parse(first.output_text), { sign: 'Aquarius' });
  assert.equal(first.text.format.type, 'json_schema');
  assert.equal(first.text.format.name, 'sign');
  assert.equal(first.text.format.strict, true);
  assert.deepEqual(first.text.format.schema, signFormat.schema);
  // Through the SDK's parse helper: an answer off the strict schema fails the response, nothing to parse.
  const parsed = await client.responses.parse({ model: 'gpt-4.1-mini', input: 'Again?', previous_response_id: first.id, text: { format: signFormat } });
  assert.equal(parsed.status, 'failed');
  assert.equal(parsed.error.code, 'server_error');
  assert.match(parsed.error.message, /sign/);
  assert.equal(parsed.output_text, '');
});

test('responses: an MCP approval request names the declared server; once approved the output holds the mcp_call', async (t) => {
  const fake = await startFake('responses', { turns: [{ steps: [
    { calls: [{ name: 'ask_question', arguments: { repo: 'toolrelay' }, approval: true }] },
    { text: 'Asked: {{result 0}}' },
  ] }] });
  t.after(fake.stop);
  setGlobalDispatcher(new Agent({ connect: { ca: readFileSync(fake.CERT) } }));
  const client = new OpenAI({ apiKey: 'any-token', baseURL: fake.BASE_URL, maxRetries: 0 });
  const tools = [{ type: 'mcp', server_label: 'deepwiki', server_url: 'https://deepwiki.example/mcp', require_approval: 'always' }];
  const first = await client.responses.create({ model: 'gpt-4.1-mini', input: 'Ask the wiki.', tools });
  const request = first.output.find((o) => o.type === 'mcp_approval_request');
  assert.ok(request, `an mcp_approval_request in ${JSON.stringify(first.output)}`);
  assert.equal(request.server_label, 'deepwiki');
  assert.equal(request.name, 'ask_question');
  const second = await client.responses.create({
    model: 'gpt-4.1-mini', tools, previous_response_id: first.id,
    input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }],
  });
  assert.deepEqual(second.output.map((o) => o.type), ['mcp_call', 'message']);
  const call = second.output[0];
  assert.equal(call.server_label, 'deepwiki');
  assert.equal(call.name, 'ask_question');
  assert.equal(call.approval_request_id, request.id);
  assert.deepEqual(JSON.parse(call.arguments), { repo: 'toolrelay' });
  assert.equal(second.output_text, 'Asked: approved');
});
