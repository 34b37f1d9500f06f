// The page of examples/web: the AI SDK's own chat client (AbstractChat
// with DefaultChatTransport, from npm ai 7.x) over package web's handler,
// rendered without a framework. esbuild bundles it into dist/app.js.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';
import { chatState } from './state.js';

// The chat's id and messages live in the tab's session storage, so that a
// reload shows the chat again and reconnects to an answer being written.
const store = window.sessionStorage;
let id = store.getItem('chat-id');
if (!id) {
  id = crypto.randomUUID();
  store.setItem('chat-id', id);
}
const saved = JSON.parse(store.getItem('chat-messages') ?? '[]');

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: chatState(init.messages, render) });
  }
}

const chat = new Chat({
  id,
  messages: saved,
  transport: new DefaultChatTransport({
    api: '/api/chat',
    // Only the newest message goes: the service keeps the conversation.
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
      body: { id, messages: messages.slice(-1), trigger, messageId },
    }),
  }),
  // Answers to every approval of a step send the message back at once.
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});

const $ = sel => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, attrs);
  for (const c of children) if (c != null) e.append(c);
  return e;
}

function toolPart(part) {
  const name = part.type.slice('tool-'.length);
  const box = el('div', { className: 'tool' });
  box.dataset.state = part.state;
  box.dataset.tool = name;
  box.dataset.call = part.toolCallId;
  box.append(el('div', { className: 'call', textContent: `⚙ ${name} ${JSON.stringify(part.input ?? {})}` }));
  switch (part.state) {
    case 'approval-requested':
      box.append(
        el('div', { className: 'why', textContent: `Needs your approval: ${part.approval.requestReason ?? ''}` }),
        el('button', { className: 'approve', textContent: 'Approve', onclick: () => answer(part, true) }),
        el('button', { className: 'deny', textContent: 'Deny', onclick: () => answer(part, false) }),
      );
      break;
    case 'approval-responded':
      box.append(el('div', { textContent: part.approval.approved ? 'Approved: running…' : 'Denied' }));
      break;
    case 'output-available':
      box.append(el('div', { className: 'output', textContent: `✓ ${typeof part.output === 'string' ? part.output : JSON.stringify(part.output)}` }));
      break;
    case 'output-error':
      box.append(el('div', { className: 'output error', textContent: `✗ ${part.errorText}` }));
      break;
    case 'output-denied':
      box.append(el('div', { className: 'output error', textContent: '✗ denied' }));
      break;
    default:
      box.append(el('div', { className: 'output', textContent: '… running' }));
  }
  return box;
}

function answer(part, approved) {
  chat.addToolApprovalResponse({
    id: part.approval.id,
    approved,
    reason: approved ? undefined : 'the customer service agent said no',
  });
}

function render() {
  const list = $('#messages');
  list.replaceChildren(
    ...chat.messages.map(m => {
      const box = el('div', { className: `message ${m.role}` });
      box.dataset.id = m.id;
      for (const part of m.parts) {
        if (part.type === 'text') box.append(el('div', { className: 'text', textContent: part.text }));
        else if (part.type === 'reasoning') box.append(el('div', { className: 'reasoning', textContent: part.text }));
        else if (part.type.startsWith('tool-')) box.append(toolPart(part));
      }
      return box;
    }),
  );
  const busy = chat.status === 'submitted' || chat.status === 'streaming';
  $('#status').textContent = chat.status + (chat.error ? `: ${chat.error.message}` : '');
  $('#status').dataset.status = chat.status;
  $('#send').disabled = busy;
  store.setItem('chat-messages', JSON.stringify(chat.messages));
}

$('#form').addEventListener('submit', e => {
  e.preventDefault();
  const text = $('#input').value.trim();
  if (!text) return;
  $('#input').value = '';
  chat.sendMessage({ text });
});

render();
// A reload: reconnect to the answer being written, if any.
if (saved.length > 0) chat.resumeStream();
