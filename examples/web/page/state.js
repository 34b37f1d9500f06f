// chatState is the ChatState an AbstractChat keeps its messages and status
// in (ai 7.x, ui/chat.ts), calling onChange after every change.
export function chatState(messages = [], onChange) {
  let status = 'ready';
  let error;
  let list = messages;
  const changed = () => queueMicrotask(onChange);
  return {
    get status() { return status; },
    set status(s) { status = s; changed(); },
    get error() { return error; },
    set error(e) { error = e; changed(); },
    get messages() { return list; },
    set messages(m) { list = [...m]; changed(); },
    pushMessage(m) { list = [...list, m]; changed(); },
    popMessage() { list = list.slice(0, -1); changed(); },
    replaceMessage(i, m) { list = [...list.slice(0, i), m, ...list.slice(i + 1)]; changed(); },
    snapshot: value => structuredClone(value),
  };
}
