// The golden transcripts of package web (../testdata/NAME-N.sse), read by
// the AI SDK's own chat client: AbstractChat over DefaultChatTransport,
// whose fetch answers each request with the next transcript of the case.
// The page's steps (send a text, answer approvals) are those of
// ../testdata/cases.json, and so are the UI messages the client must make.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';

const testdata = new URL('../testdata/', import.meta.url);
const cases = JSON.parse(readFileSync(new URL('cases.json', testdata), 'utf8'));

// The simplest ChatState (ui/chat.ts): an array and a status.
function state() {
  return {
    status: 'ready',
    error: undefined,
    messages: [],
    pushMessage(m) { this.messages = [...this.messages, m]; },
    popMessage() { this.messages = this.messages.slice(0, -1); },
    replaceMessage(i, m) { this.messages = this.messages.map((old, j) => (j === i ? m : old)); },
    snapshot: v => structuredClone(v),
  };
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: state() }); }
}

// matches checks that got has every field of want, recursively (arrays
// element by element, of the same length).
function matches(got, want, path = 'messages') {
  if (Array.isArray(want)) {
    assert.ok(Array.isArray(got), `${path}: not an array: ${JSON.stringify(got)}`);
    assert.equal(got.length, want.length, `${path}: ${JSON.stringify(got, null, 1)}`);
    want.forEach((w, i) => matches(got[i], w, `${path}[${i}]`));
  } else if (want !== null && typeof want === 'object') {
    assert.ok(got !== null && typeof got === 'object', `${path}: not an object: ${JSON.stringify(got)}`);
    for (const [k, w] of Object.entries(want)) matches(got[k], w, `${path}.${k}`);
  } else {
    assert.deepEqual(got, want, path);
  }
}

const settled = chat => new Promise(resolve => {
  const poll = () => (chat.status === 'ready' || chat.status === 'error' ? resolve() : setTimeout(poll, 5));
  setTimeout(poll, 5);
});

for (const c of cases) {
  test(`${c.name}: ${c.about}`, async () => {
    const requests = [];
    let n = 0;
    const fetch = async (url, init) => {
      requests.push(JSON.parse(init.body));
      n++;
      const sse = readFileSync(new URL(`${c.name}-${n}.sse`, testdata));
      return new Response(sse, {
        headers: { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' },
      });
    };
    const errors = [];
    const chat = new Chat({
      id: 'chat-1',
      transport: new DefaultChatTransport({ api: '/api/chat', fetch }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onError: e => errors.push(e.message),
    });
    for (const step of c.steps) {
      if (step.send) {
        await chat.sendMessage({ text: step.send });
      } else {
        const before = n;
        for (const a of step.answer) await chat.addToolApprovalResponse(a);
        for (let i = 0; n === before && i < 200; i++) await new Promise(r => setTimeout(r, 5));
        assert.equal(n, before + 1, 'answering every approval sends the message back');
      }
      await settled(chat);
    }
    assert.equal(n, c.steps.length, 'one request per step');
    matches(chat.messages, c.messages);
    assert.deepEqual(errors, c.error ? [c.error] : [], 'errors');
    assert.equal(chat.status, c.error ? 'error' : 'ready');
    // What the client sent: the chat's id, the trigger, and for an answer
    // the assistant's message with its approvals answered, which the
    // handler reads.
    for (const r of requests) {
      assert.equal(r.id, 'chat-1');
      assert.equal(r.trigger, 'submit-message');
    }
    c.steps.forEach((step, i) => {
      if (!step.answer) return;
      const last = requests[i].messages.at(-1);
      assert.equal(last.role, 'assistant');
      assert.equal(requests[i].messageId, last.id);
      const answered = last.parts.filter(p => p.state === 'approval-responded').map(p => ({ id: p.approval.id, approved: p.approval.approved, ...(p.approval.reason ? { reason: p.approval.reason } : {}) }));
      assert.deepEqual(answered, step.answer);
    });
  });
}
