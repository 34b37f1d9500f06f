// The official A2A JavaScript SDK's client (@a2a-js/sdk, through its
// v0.3 compatibility layer) against runners served as A2A agents by
// package a2atools (the Go test binary named by TOOLRELAY_A2A_SERVER,
// which serves when TOOLRELAY_A2A_SERVE=http): it reads the agent card,
// sends, streams, cancels and answers an approval as a JavaScript program
// would. Any deviation the SDK notices fails a test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const server = process.env.TOOLRELAY_A2A_SERVER;
if (!server) throw new Error('TOOLRELAY_A2A_SERVER must name the Go test binary that serves the agents');

let base;
let stop;

// The server is started once; it prints the URL it serves at.
before(async () => {
  const child = spawn(server, [], { env: { ...process.env, TOOLRELAY_A2A_SERVE: 'http' }, stdio: ['ignore', 'pipe', 'inherit'] });
  base = await new Promise((resolve, reject) => {
    let out = '';
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`server exited with ${code} before it was ready`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/URL=(\S+)/);
      if (m) resolve(m[1]);
    });
  });
  stop = () => child.kill();
});

after(() => stop?.());

// client returns the SDK's client of the agent at path, its requests
// naming the identity "ana" (the served handler's X-User header).
async function client(path) {
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set('X-User', 'ana');
    return fetch(url, { ...init, headers });
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
    cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
  }));
  return factory.createFromUrl(`${base}${path}/.well-known/agent-card.json`, '');
}

function userMessage(text, { taskId = '', contextId = '' } = {}) {
  return {
    message: {
      messageId: randomUUID(), contextId, taskId, role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: text } }],
    },
  };
}

function partsText(parts) {
  return (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');
}

function artifactText(task) {
  return (task.artifacts ?? []).map((a) => partsText(a.parts)).join('');
}

test('send: the task completes with the answer as its artifact; tasks/get returns it', async () => {
  const c = await client('/lookup');
  const task = await c.sendMessage(userMessage('where is order 7?'));
  assert.ok(task.status, 'the result is a task');
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(artifactText(task), 'Your order 7 is shipped.');
  const got = await c.getTask({ id: task.id });
  assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(artifactText(got), 'Your order 7 is shipped.');
  await assert.rejects(c.getTask({ id: 'no-such-task' }), /not found/i);
});

test('stream: status and artifact updates, the pieces making the answer, then completed', async () => {
  const c = await client('/lookup');
  const kinds = [];
  let pieces = '';
  let whole = '';
  let final;
  for await (const ev of c.sendMessageStream(userMessage('where is order 7?'))) {
    const { $case, value } = ev.payload;
    if ($case === 'artifactUpdate') {
      const text = partsText(value.artifact.parts);
      if (value.lastChunk) whole = text;
      else pieces += text;
      if (kinds.at(-1) !== 'artifactUpdate') kinds.push('artifactUpdate');
      continue;
    }
    kinds.push($case === 'statusUpdate' ? `status ${value.status.state}` : $case);
    if ($case === 'statusUpdate') final = value.status.state;
  }
  assert.deepEqual(kinds, ['task', `status ${TaskState.TASK_STATE_WORKING}`, 'artifactUpdate', `status ${TaskState.TASK_STATE_COMPLETED}`]);
  assert.equal(pieces, 'Your order 7 is shipped.');
  assert.equal(whole, pieces);
  assert.equal(final, TaskState.TASK_STATE_COMPLETED);
});

test('cancel: tasks/cancel stops the run; the stream ends canceled', async () => {
  const c = await client('/wait');
  let taskId;
  let canceled;
  const states = [];
  for await (const ev of c.sendMessageStream(userMessage('wait for it'))) {
    const { $case, value } = ev.payload;
    if ($case === 'task') taskId = value.id;
    if ($case === 'statusUpdate') {
      states.push(value.status.state);
      if (value.status.state === TaskState.TASK_STATE_WORKING) {
        canceled = c.cancelTask({ id: taskId });
      }
    }
  }
  const task = await canceled;
  assert.equal(task.status.state, TaskState.TASK_STATE_CANCELED);
  assert.deepEqual(states, [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_CANCELED]);
  const got = await c.getTask({ id: taskId });
  assert.equal(got.status.state, TaskState.TASK_STATE_CANCELED);
});

test('approval: input-required names the call; "approve" on the task completes it', async () => {
  const c = await client('/refund');
  const task = await c.sendMessage(userMessage('refund order 7'));
  assert.equal(task.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  assert.match(partsText(task.status.message.parts), /refund \{"order":"7"\} \(money goes out\)/);
  const data = task.status.message.parts.find((p) => p.content?.$case === 'data').content.value;
  assert.equal(data.approvals[0].name, 'refund');
  const done = await c.sendMessage(userMessage('approve', { taskId: task.id, contextId: task.contextId }));
  assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(artifactText(done), 'Done: refunded 7.');
});
