// The DOM of one message. User text is shown as text (never parsed as HTML); the assistant's
// thinking and answer go through renderMarkdown. An assistant view is updated in place while it
// streams: update() re-renders at most once per animation frame.
import { decorateCode, renderMarkdown } from './markdown.js';
import { splitToolCalls, toolCallView } from './toolcalls.js';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label, cls, onClick, aria) {
  const b = el('button', cls, label);
  b.type = 'button';
  if (aria) b.setAttribute('aria-label', aria);
  b.addEventListener('click', onClick);
  return b;
}

export function seconds(s) {
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

export function statsText(st) {
  if (!st) return '';
  const parts = [];
  if (st.fromResponseCache) parts.push('from the response cache');
  if (st.completionTokens !== undefined) parts.push(`${st.completionTokens} tokens`);
  if (st.tokensPerSecond) parts.push(`${st.tokensPerSecond.toFixed(1)} t/s`);
  if (st.ttft !== undefined) parts.push(`first token ${seconds(st.ttft)}`);
  if (st.promptTokens !== undefined) parts.push(`prompt ${st.promptTokens} tokens, ${st.cachedTokens ?? 0} from the cache`);
  if (st.stopped) parts.push('stopped');
  if (st.finishReason === 'length') parts.push('cut at the token limit');
  return parts.join(' · ');
}

export function userView(msg, { onEdit }) {
  const root = el('article', 'msg user');
  root.setAttribute('aria-label', 'You');
  const bubble = el('div', 'bubble', msg.content);
  const actions = el('div', 'actions');
  actions.append(button('Edit', 'edit', () => onEdit(root), 'Edit this message and send it again'));
  root.append(bubble, actions);
  return root;
}

// An editor in place of a user message: Save & send / Cancel.
export function editView(msg, { onSave, onCancel }) {
  const root = el('article', 'msg user editing');
  const area = el('textarea', 'edit-area');
  area.value = msg.content;
  area.setAttribute('aria-label', 'Edit your message');
  const actions = el('div', 'actions');
  actions.append(button('Cancel', '', onCancel), button('Save & send', 'primary save-edit', () => onSave(area.value)));
  area.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      onSave(area.value);
    } else if (e.key === 'Escape') {
      onCancel();
    }
  });
  root.append(area, actions);
  setTimeout(() => area.focus(), 0);
  return root;
}

export function assistantView(msg, { copy, onRegenerate }) {
  const root = el('article', 'msg assistant');
  root.setAttribute('aria-label', 'Ponder');
  const thinking = el('details', 'thinking');
  const summary = el('summary');
  const label = el('span', 'think-label', 'Thinking');
  const meta = el('span', 'think-meta');
  summary.append(label, meta);
  const thinkBody = el('div', 'think-body md');
  thinking.append(summary, thinkBody);
  const answer = el('div', 'answer md');
  const error = el('div', 'msg-error');
  error.setAttribute('role', 'alert');
  error.hidden = true;
  const stats = el('div', 'stats');
  const actions = el('div', 'actions');
  actions.append(
    button('Copy', 'copy-answer', () => copy(msg.content), 'Copy the answer'),
    button('Regenerate', 'regenerate', () => onRegenerate(root), 'Generate this answer again'),
  );
  root.append(thinking, answer, error, stats, actions);

  let pending = false;
  const render = () => {
    pending = false;
    const live = msg.streaming;
    thinking.hidden = !msg.reasoning && !live;
    if (thinkBody.dataset.src !== msg.reasoning) {
      thinkBody.innerHTML = renderMarkdown(msg.reasoning);
      thinkBody.dataset.src = msg.reasoning;
      decorateCode(thinkBody, copy);
    }
    const thinkingNow = live && !msg.content;
    const reading = live && msg.promptProgress !== undefined;
    label.textContent = reading ? `Reading the prompt… ${Math.round(100 * msg.promptProgress)}%` : thinkingNow ? 'Thinking…' : 'Thought';
    thinking.classList.toggle('live', thinkingNow);
    const t = msg.thinkStats ?? {};
    meta.textContent = [t.tokens ? `${t.tokens} tokens` : '', t.seconds !== undefined ? seconds(t.seconds) : ''].filter(Boolean).join(' · ');
    if (answer.dataset.src !== msg.content) {
      // Tool calls R1 wrote as text become cards after the answer's own text.
      const { text, calls } = splitToolCalls(msg.content);
      answer.innerHTML = renderMarkdown(text);
      answer.dataset.src = msg.content;
      decorateCode(answer, copy);
      for (const call of calls) answer.append(toolCallView(call));
    }
    error.hidden = !msg.error;
    error.textContent = msg.error ?? '';
    stats.textContent = live || msg.error ? '' : statsText(msg.stats);
    actions.hidden = live;
    root.classList.toggle('streaming', !!live);
  };
  render();
  return {
    root,
    update() {
      if (pending) return;
      pending = true;
      requestAnimationFrame(render);
    },
    flush: render,
    setThinkingOpen(open) { thinking.open = open; },
  };
}
