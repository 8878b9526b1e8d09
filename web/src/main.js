// Ponder's chat page: conversations (sidebar, IndexedDB), the streamed chat with R1's thinking,
// Stop / Answer now, settings, the server panel and the server's states (loading, unreachable,
// 401, failed requests).
import { ApiError, answerNow, health, models, streamChat } from './api.js';
import { assistantView, editView, userView } from './messages.js';
import { Panel } from './panel.js';
import * as store from './store.js';

const $ = (id) => document.getElementById(id);
const ui = {
  app: $('app'), sidebar: $('sidebar'), list: $('conversations'), search: $('search'), messages: $('messages'),
  empty: $('empty'), input: $('input'), composer: $('composer'), send: $('send'), stop: $('stop'),
  answerNow: $('answer-now'), banner: $('banner'), status: $('status'), title: $('title'), panel: $('panel'),
  togglePanel: $('toggle-panel'), settings: $('settings'), settingsForm: $('settings-form'),
  keyDialog: $('key-dialog'), keyForm: $('key-form'), importFile: $('import-file'),
  modelPicker: $('model-picker'),
};

const state = {
  settings: store.loadSettings(),
  conversations: [],
  current: null,
  active: null,       // {controller, requestId, msg}
  model: '',
  server: 'unknown',  // ok | loading | draining | unreachable | error
};

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const t = document.createElement('textarea');
    t.value = text;
    document.body.append(t);
    t.select();
    document.execCommand('copy');
    t.remove();
  }
}

// ---- server state ------------------------------------------------------------------------

let bannerTimer = null;
function showBanner(kind, text) {
  clearTimeout(bannerTimer);
  // Notes about one action (an import, a failed call) fade; the server's state stays shown.
  if (text && kind === 'info') bannerTimer = setTimeout(() => showBanner(null, ''), 6000);
  ui.banner.hidden = !text;
  ui.banner.className = kind ? `banner-${kind}` : '';
  ui.banner.textContent = text ?? '';
}

function setServerState(s, message) {
  state.server = s;
  document.body.dataset.server = s;
  const texts = {
    ok: '',
    loading: 'The server is loading the model. The page will be ready in a moment.',
    draining: 'The server is shutting down and takes no new requests.',
    unreachable: 'The server cannot be reached. Is `ponder serve` running? Retrying…',
    error: `The server answered with an error: ${message ?? ''}`,
  };
  ui.status.textContent = s === 'ok' ? (state.model ? `● ${state.model}` : '● ready') : s === 'loading' ? '◌ loading' : s === 'unreachable' ? '○ offline' : '○ ' + s;
  ui.status.dataset.state = s;
  if (s === 'ok' && ui.banner.dataset.source === 'health') showBanner(null, '');
  if (s !== 'ok') {
    showBanner(s === 'loading' ? 'info' : 'error', texts[s]);
    ui.banner.dataset.source = 'health';
  }
}

// The model picker, shown when the server offers more than one model (ponder serve -m A -m B);
// the choice is remembered with the settings.
function showModels(ids) {
  state.model = ids.includes(state.settings.model) ? state.settings.model : (ids[0] ?? '');
  ui.modelPicker.replaceChildren(...ids.map((id) => new Option(id, id, false, id === state.model)));
  ui.modelPicker.hidden = ids.length < 2;
  $('panel-model').textContent = state.model;
}

ui.modelPicker.addEventListener('change', () => {
  state.model = ui.modelPicker.value;
  state.settings.model = state.model;
  store.saveSettings(state.settings);
  $('panel-model').textContent = state.model;
  if (state.server === 'ok') setServerState('ok');
});

// One look at the server: its health, then (when ready and not known yet) the models' names.
async function refreshServer({ askKey }) {
  const h = await health();
  setServerState(h.status, h.message);
  if (h.status === 'ok' && !state.model) {
    try {
      showModels((await models(state.settings.api_key)).map((m) => m.id));
      setServerState('ok');
    } catch (e) {
      if (askKey && e instanceof ApiError && e.status === 401) askForKey();
    }
  }
  return h.status;
}

// Polled: every 10 s while ready, every second otherwise.
async function checkHealth() {
  const s = await refreshServer({ askKey: true });
  setTimeout(checkHealth, s === 'ok' ? 10000 : 1000);
}

// ---- the API key -------------------------------------------------------------------------

let keyWaiters = [];
function askForKey() {
  return new Promise((resolve) => {
    keyWaiters.push(resolve);
    if (!ui.keyDialog.open) {
      $('key-input').value = state.settings.api_key;
      ui.keyDialog.showModal();
    }
  });
}

ui.keyDialog.addEventListener('close', () => {
  const ok = ui.keyDialog.returnValue === 'save' && $('key-input').value.trim();
  if (ok) {
    state.settings.api_key = $('key-input').value.trim();
    store.saveSettings(state.settings);
    state.model = '';
    checkHealthSoon();
  }
  const waiters = keyWaiters;
  keyWaiters = [];
  for (const w of waiters) w(!!ok);
});

// Now, after a change (a new key, a failed request); the next request says what is wrong.
function checkHealthSoon() {
  refreshServer({ askKey: false });
}

// ---- conversations -----------------------------------------------------------------------

function matches(c, q) {
  if (!q) return true;
  q = q.toLowerCase();
  return c.title.toLowerCase().includes(q) || c.messages.some((m) => m.content.toLowerCase().includes(q));
}

function renderSidebar() {
  const q = ui.search.value.trim();
  ui.list.replaceChildren();
  for (const c of state.conversations.filter((c) => matches(c, q))) {
    const li = document.createElement('li');
    li.className = 'conv' + (state.current?.id === c.id ? ' current' : '');
    li.dataset.id = c.id;
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'conv-open';
    open.textContent = c.title;
    open.title = c.title;
    if (state.current?.id === c.id) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => openConversation(c));
    const rename = document.createElement('button');
    rename.type = 'button';
    rename.className = 'icon conv-rename';
    rename.textContent = '✎';
    rename.setAttribute('aria-label', `Rename “${c.title}”`);
    rename.addEventListener('click', () => startRename(li, c));
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'icon conv-delete';
    del.textContent = '×';
    del.setAttribute('aria-label', `Delete “${c.title}”`);
    del.addEventListener('click', () => removeConversation(c));
    li.append(open, rename, del);
    ui.list.append(li);
  }
}

function startRename(li, c) {
  const input = document.createElement('input');
  input.className = 'rename-input';
  input.value = c.title;
  input.setAttribute('aria-label', 'New name');
  li.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    if (save && input.value.trim()) {
      c.title = input.value.trim().slice(0, 200);
      await store.saveConversation(c);
      if (state.current?.id === c.id) ui.title.textContent = c.title;
    }
    await refreshList();
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
}

async function removeConversation(c) {
  if (!confirm(`Delete “${c.title}”?`)) return;
  if (state.active && state.current?.id === c.id) stop();
  await store.deleteConversation(c.id);
  if (state.current?.id === c.id) state.current = null;
  await refreshList();
  if (!state.current) openConversation(state.conversations[0] ?? store.newConversation());
}

async function refreshList() {
  state.conversations = await store.listConversations();
  renderSidebar();
}

function openConversation(c) {
  if (state.active) stop();
  state.current = c;
  ui.title.textContent = c.title;
  renderMessages();
  renderSidebar();
  ui.app.classList.remove('sidebar-open');
  ui.input.focus();
}

function renderMessages() {
  const c = state.current;
  ui.messages.replaceChildren();
  ui.empty.hidden = c.messages.length > 0;
  ui.messages.append(ui.empty);
  c.messages.forEach((m, i) => {
    const v = viewFor(m, i);
    ui.messages.append(v.root ?? v);
  });
  scrollToEnd(true);
}

function viewFor(m, i) {
  if (m.role === 'user') return userView(m, { onEdit: (node) => startEdit(node, i) });
  return assistantView(m, { copy: copyText, onRegenerate: () => regenerate(i) });
}

function startEdit(node, i) {
  if (state.active) return;
  const m = state.current.messages[i];
  const editor = editView(m, {
    onSave: (text) => {
      if (!text.trim()) return;
      state.current.messages = state.current.messages.slice(0, i);
      state.current.messages.push({ role: 'user', content: text });
      renderMessages();
      generate();
    },
    onCancel: () => renderMessages(),
  });
  node.replaceWith(editor);
}

function regenerate(i) {
  if (state.active) return;
  state.current.messages = state.current.messages.slice(0, i);
  renderMessages();
  generate();
}

function scrollToEnd(force) {
  const m = ui.messages;
  if (force || m.scrollHeight - m.scrollTop - m.clientHeight < 120) m.scrollTop = m.scrollHeight;
}

// ---- sending -----------------------------------------------------------------------------

function plain(m) {
  const { streaming, promptProgress, ...rest } = m;
  return rest;
}

async function persist() {
  const c = state.current;
  await store.saveConversation({ ...c, messages: c.messages.map(plain) });
  await refreshList();
}

function requestBody() {
  const s = state.settings;
  const messages = [];
  if (s.system.trim()) messages.push({ role: 'system', content: s.system });
  // Earlier answers go back without their thinking, as the chat template expects.
  for (const m of state.current.messages) {
    // An answer stopped or failed before any text adds nothing to the conversation.
    if (m.role === 'user' || (m.role === 'assistant' && !m.error && m.content)) messages.push({ role: m.role, content: m.content });
  }
  // return_progress: the server reports how far it has read a long prompt before the first token.
  const body = { messages, stream: true, stream_options: { include_usage: true }, return_progress: true };
  if (state.model) body.model = state.model;
  const num = (v) => (v === '' || v === null || v === undefined ? null : Number(v));
  if (num(s.temperature) !== null) body.temperature = num(s.temperature);
  if (num(s.top_p) !== null) body.top_p = num(s.top_p);
  if (num(s.max_tokens) !== null) body.max_tokens = num(s.max_tokens);
  if (num(s.reasoning_budget) !== null) body.reasoning_budget = num(s.reasoning_budget);
  return body;
}

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
  ui.answerNow.hidden = true;
  document.body.classList.toggle('busy', busy);
}

async function send(text) {
  if (!text.trim() || state.active) return;
  const c = state.current;
  if (c.messages.length === 0) {
    c.title = text.trim().replace(/\s+/g, ' ').slice(0, 60);
    ui.title.textContent = c.title;
  }
  c.messages.push({ role: 'user', content: text });
  ui.input.value = '';
  autosize();
  ui.empty.hidden = true;
  ui.messages.append(userView(c.messages.at(-1), { onEdit: (node) => startEdit(node, c.messages.length - 1) }));
  await persist();
  generate();
}

async function generate() {
  const c = state.current;
  const body = requestBody();  // before the new answer joins the conversation
  const msg = { role: 'assistant', content: '', reasoning: '', stats: null, streaming: true, thinkStats: { tokens: 0 } };
  c.messages.push(msg);
  const index = c.messages.length - 1;
  const view = viewFor(msg, index);
  ui.empty.hidden = true;
  ui.messages.append(view.root);
  view.setThinkingOpen(true);
  scrollToEnd(true);
  const controller = new AbortController();
  const active = { controller, requestId: null, msg };
  state.active = active;
  setBusy(true);
  const t0 = performance.now();
  let tFirst = null;
  let tThinkEnd = null;
  let usage = null;
  let finish = null;
  const tick = setInterval(() => {
    if (!msg.content && tFirst !== null) {
      msg.thinkStats.seconds = (performance.now() - tFirst) / 1000;
      view.update();
    }
  }, 250);
  try {
    await streamChat(body, {
      key: state.settings.api_key,
      conversationId: c.id,
      signal: controller.signal,
      onStart: (id) => { active.requestId = id; },
      onChunk: (chunk) => {
        if (!active.requestId && chunk.id) active.requestId = chunk.id;
        if (chunk.usage) usage = chunk.usage;
        if (chunk.prompt_progress && tFirst === null) {
          const p = chunk.prompt_progress;
          const todo = Math.max(1, p.total - p.cache);
          msg.promptProgress = Math.min(1, Math.max(0, (p.processed - p.cache) / todo));
          view.update();
          return;
        }
        const choice = chunk.choices?.[0];
        if (!choice) return;
        const d = choice.delta ?? {};
        const r = d.reasoning_content ?? d.reasoning ?? '';
        if ((r || d.content) && tFirst === null) {
          tFirst = performance.now();
          delete msg.promptProgress;
        }
        if (r) {
          msg.reasoning += r;
          msg.thinkStats.tokens += 1;
          ui.answerNow.hidden = !!msg.content;
        }
        if (d.content) {
          if (!msg.content) {
            tThinkEnd = performance.now();
            if (msg.reasoning) msg.thinkStats.seconds = (tThinkEnd - (tFirst ?? t0)) / 1000;
            view.setThinkingOpen(false);
            ui.answerNow.hidden = true;
          }
          msg.content += d.content;
        }
        if (choice.finish_reason) finish = choice.finish_reason;
        view.update();
        scrollToEnd(false);
      },
    });
  } catch (e) {
    if (e.name === 'AbortError') {
      msg.stopped = true;
    } else if (e instanceof ApiError && e.status === 401) {
      c.messages.splice(index, 1);
      view.root.remove();
      clearInterval(tick);
      state.active = null;
      setBusy(false);
      if (await askForKey()) return generate();
      showBanner('error', 'The server needs an API key: set it in Settings.');
      ui.banner.dataset.source = 'request';
      await persist();
      return;
    } else {
      msg.error = e.status === 0 ? e.message : `The request failed: ${e.message}`;
      if (e.status === 0) checkHealthSoon();
    }
  } finally {
    clearInterval(tick);
  }
  const tEnd = performance.now();
  if (msg.reasoning && msg.thinkStats.seconds === undefined) msg.thinkStats.seconds = ((tThinkEnd ?? tEnd) - (tFirst ?? t0)) / 1000;
  if (usage?.completion_tokens_details?.reasoning_tokens !== undefined) msg.thinkStats.tokens = usage.completion_tokens_details.reasoning_tokens;
  const generated = usage?.completion_tokens ?? msg.thinkStats.tokens;
  msg.stats = {
    completionTokens: generated,
    promptTokens: usage?.prompt_tokens,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    ttft: tFirst !== null ? (tFirst - t0) / 1000 : undefined,
    tokensPerSecond: tFirst !== null && tEnd > tFirst && generated > 1 ? (generated - 1) / ((tEnd - tFirst) / 1000) : undefined,
    fromResponseCache: !!usage?.response_cached,
    finishReason: finish,
    stopped: !!msg.stopped,
  };
  msg.streaming = false;
  view.setThinkingOpen(false);
  view.flush();
  state.active = null;
  setBusy(false);
  if (state.current === c) await persist();
  else await store.saveConversation({ ...c, messages: c.messages.map(plain) });
}

function stop() {
  state.active?.controller.abort();
}

async function endThinking() {
  const a = state.active;
  if (!a?.requestId) return;
  ui.answerNow.hidden = true;
  try {
    await answerNow(a.requestId, state.settings.api_key);
  } catch (e) {
    showBanner('error', `Answer now failed: ${e.message}`);
    ui.banner.dataset.source = 'request';
  }
}

// ---- the composer, keys, dialogs ---------------------------------------------------------

function autosize() {
  ui.input.style.height = 'auto';
  ui.input.style.height = Math.min(ui.input.scrollHeight, 240) + 'px';
}

ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  send(ui.input.value);
});
ui.input.addEventListener('input', autosize);
ui.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send(ui.input.value);
  }
});
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && state.active && !ui.settings.open && !ui.keyDialog.open) {
    e.preventDefault();
    stop();
  }
});
ui.stop.addEventListener('click', stop);
ui.banner.addEventListener('click', () => { if (ui.banner.dataset.source !== 'health') showBanner(null, ''); });
ui.answerNow.addEventListener('click', endThinking);
$('new-chat').addEventListener('click', () => openConversation(store.newConversation()));
ui.search.addEventListener('input', renderSidebar);
$('open-sidebar').addEventListener('click', () => ui.app.classList.add('sidebar-open'));
$('close-sidebar').addEventListener('click', () => ui.app.classList.remove('sidebar-open'));

$('export').addEventListener('click', async () => {
  const blob = new Blob([store.exportJson(await store.listConversations())], { type: 'application/json' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `ponder-conversations-${new Date().toISOString().slice(0, 10)}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
});
$('import').addEventListener('click', () => ui.importFile.click());
ui.importFile.addEventListener('change', async () => {
  const file = ui.importFile.files[0];
  ui.importFile.value = '';
  if (!file) return;
  try {
    const list = store.parseImport(await file.text());
    for (const c of list) await store.saveConversation(c);
    await refreshList();
    if (list.length) openConversation(state.conversations.find((c) => c.id === list[0].id) ?? list[0]);
    showBanner('info', `Imported ${list.length} conversation${list.length === 1 ? '' : 's'}.`);
    ui.banner.dataset.source = 'import';
  } catch (e) {
    showBanner('error', `Import failed: ${e.message}`);
    ui.banner.dataset.source = 'import';
  }
});

$('open-settings').addEventListener('click', () => {
  for (const [k, v] of Object.entries(state.settings)) {
    const f = ui.settingsForm.elements[k];
    if (f) f.value = v;
  }
  ui.settings.showModal();
});
ui.settings.addEventListener('close', () => {
  if (ui.settings.returnValue !== 'save') return;
  for (const k of Object.keys(store.defaultSettings)) {
    const f = ui.settingsForm.elements[k];
    if (f) state.settings[k] = f.value;
  }
  store.saveSettings(state.settings);
  state.model = '';
  checkHealthSoon();
});

const panel = new Panel($('charts'), () => state.settings.api_key, () => {});
ui.togglePanel.addEventListener('click', () => {
  const open = ui.panel.hidden;
  ui.panel.hidden = !open;
  ui.togglePanel.setAttribute('aria-expanded', String(open));
  ui.app.classList.toggle('panel-open', open);
  if (open) panel.start();
  else panel.stop();
});

// ---- start -------------------------------------------------------------------------------

(async () => {
  await refreshList();
  openConversation(state.conversations[0] ?? store.newConversation());
  checkHealth();
})();
