// The page end to end: Debian's Chromium (playwright-core) against a real `ponder serve` on a
// tiny model, started here on loopback ports and stopped at the end. Screenshots of the main
// states go to SHOTS_DIR.
// Usage: node web/test/e2e.mjs PONDER_BINARY MODEL SHOTS_DIR
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [ponder, model, shots] = process.argv.slice(2);
if (!ponder || !model || !shots) {
  console.error('usage: node web/test/e2e.mjs PONDER_BINARY MODEL SHOTS_DIR');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const scratch = mkdtempSync(join(tmpdir(), 'ponder-web-'));
const KEY = 'web-test-key';

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startServer(extra = []) {
  const port = await freePort();
  const cache = mkdtempSync(join(scratch, 'cache-'));
  const proc = spawn(ponder, ['serve', '-m', model, '--port', String(port), '-c', '4096', '--cache-dir', cache, ...extra],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; ++i) {
    try {
      if ((await fetch(`${url}/health`)).ok) return { proc, url, log: () => log };
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  throw new Error(`ponder serve did not start:\n${log}`);
}

function stopServer(s) {
  return new Promise((resolve) => {
    if (s.proc.exitCode !== null) return resolve();
    s.proc.once('exit', resolve);
    s.proc.kill('SIGKILL');
  });
}

async function metrics(url, key) {
  const res = await fetch(`${url}/metrics`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const out = {};
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}

async function until(what, f, timeoutMs = 15000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) {
      await page?.screenshot({ path: join(shots, `timeout-${what.replace(/\W+/g, '-')}.png`) }).catch(() => {});
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

let browser;
let server;
let context;
let page;
const pageErrors = [];
const chatRequests = [];

async function newPage(ctx, url) {
  const p = await ctx.newPage();
  p.on('pageerror', (e) => pageErrors.push(e.message));
  p.on('console', (m) => { if (m.type() === 'error' && !/status of (401|400|503)/.test(m.text())) pageErrors.push(`${m.text()} at ${JSON.stringify(m.location())} during ${currentTest}`); });
  p.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) chatRequests.push({ headers: r.headers(), body: JSON.parse(r.postData() ?? '{}') }); });
  await p.goto(url);
  return p;
}

async function shot(p, name) {
  await p.screenshot({ path: join(shots, `${name}.png`) });
}

// Sends a message from the composer with the keyboard.
async function sendMessage(p, text) {
  await p.fill('#input', text);
  await p.press('#input', 'Enter');
}

let currentTest = '';
const lastAssistant = (p) => p.locator('.msg.assistant').last();

const testOrder = [];
beforeEach((t) => {
  currentTest = t.name;
  testOrder.push(t.name);
});

before(async () => {
  server = await startServer();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  page = await newPage(context, server.url);
});

after(async () => {
  await browser?.close();
  if (server) await stopServer(server);
  rmSync(scratch, { recursive: true, force: true });
});

test('the page is served compressed, cached and under a strict CSP', async () => {
  const res = await fetch(`${server.url}/`, { headers: { 'Accept-Encoding': 'gzip' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-encoding'), 'gzip');
  const csp = res.headers.get('content-security-policy');
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
  const html = await res.text();
  const js = html.match(/src="(\/main-[^"]+\.js)"/)[1];
  const asset = await fetch(server.url + js);
  assert.match(asset.headers.get('cache-control'), /immutable/);
  const etag = res.headers.get('etag');
  const again = await fetch(`${server.url}/`, { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
  await until('the ready status', async () => /tiny/.test(await page.textContent('#status')));
  await shot(page, 'empty-light');
});

// The tiny model's random weights may close the thinking or end the answer at any token (greedy
// decoding of 'Why is the sky blue?' stops after ~300 tokens on one machine and sooner on others),
// so while a test needs a reply that runs until the page stops it, the requests the page sends go
// out with </think> and the end-of-sentence token banned (logit_bias); Answer now still closes the
// thinking, since the server writes </think> itself.
async function holdRepliesOpen(p) {
  const res = await fetch(`${server.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: '</think><｜end▁of▁sentence｜>' }) });
  const ids = (await res.json()).tokens;
  assert.equal(ids.length, 2, 'each of </think> and the end of sentence is one token');
  await p.route('**/v1/chat/completions', (route) => {
    const body = JSON.parse(route.request().postData());
    body.logit_bias = Object.fromEntries(ids.map((id) => [id, -100]));
    return route.continue({ postData: JSON.stringify(body) });
  });
}

test('a message streams: live thinking with its count, Answer now ends it, the answer follows', async () => {
  await holdRepliesOpen(page);
  await page.click('#open-settings');
  await page.fill('#settings-form [name=temperature]', '0');
  await page.click('#settings-save');
  await sendMessage(page, 'Why is the sky blue?');
  await page.waitForSelector('.msg.user .bubble');
  assert.equal(await page.textContent('.msg.user .bubble'), 'Why is the sky blue?');
  const thinking = lastAssistant(page).locator('details.thinking');
  await until('live thinking', async () => (await thinking.getAttribute('class')).includes('live'));
  assert.equal(await thinking.evaluate((d) => d.open), true, 'thinking is open while it streams');
  await until('thinking tokens', async () => Number((await thinking.locator('.think-meta').textContent()).split(' ')[0]) > 5);
  await shot(page, 'thinking-live');
  await until('the Answer now button', () => page.isVisible('#answer-now')).catch((e) => {
    throw new Error(`${e.message}; last request ${JSON.stringify(chatRequests.at(-1)?.body)}`);
  });
  await page.click('#answer-now');
  await until('an answer', async () => (await lastAssistant(page).locator('.answer').textContent()).length > 0);
  assert.equal(await thinking.evaluate((d) => d.open), false, 'thinking folds when the answer starts');
  await page.click('#stop');
  await until('the end of the request', async () => !(await page.isVisible('#stop')));
  const stats = await lastAssistant(page).locator('.stats').textContent();
  assert.match(stats, /\d+ tokens/);
  assert.match(stats, /first token/);
  // Thinking is collapsible: the summary opens and closes it.
  await thinking.locator('summary').click();
  assert.equal(await thinking.evaluate((d) => d.open), true);
  await thinking.locator('summary').click();
  assert.equal(await thinking.evaluate((d) => d.open), false);
  // The request carried the conversation id, and the stream its usage.
  const req = chatRequests.at(-1);
  assert.match(req.headers['x-conversation-id'], /^[0-9a-f]{32}$/);
  assert.equal(req.body.stream, true);
  await shot(page, 'answered-light');
});

test('Shift+Enter is a new line, Enter sends', async () => {
  const n = chatRequests.length;
  await page.fill('#input', 'line one');
  await page.press('#input', 'Shift+Enter');
  await page.type('#input', 'line two');
  assert.equal(await page.inputValue('#input'), 'line one\nline two');
  assert.equal(chatRequests.length, n, 'Shift+Enter sent nothing');
  await page.fill('#input', '');
});

test('the next turn sends earlier answers without their thinking', async () => {
  const reasoning = await lastAssistant(page).locator('.think-body').textContent();
  const answer = await page.evaluate(() => document.querySelector('.msg.assistant:last-of-type .answer').dataset.src);
  await sendMessage(page, 'And at sunset?');
  await until('the second request', async () => chatRequests.length >= 2);
  const body = chatRequests.at(-1).body;
  const prev = body.messages.find((m) => m.role === 'assistant');
  assert.equal(prev.content, answer);
  assert.ok(reasoning.length > 0 && !prev.content.includes(reasoning.slice(0, 20)));
  assert.equal(chatRequests.at(-1).headers['x-conversation-id'], chatRequests.at(-2).headers['x-conversation-id']);
  await page.keyboard.press('Escape');
  await until('the end of the request', async () => !(await page.isVisible('#stop')));
  await page.unroute('**/v1/chat/completions');
});

let firstChatUserMessages = 3;  // the first conversation's questions (one more if Stop tries again)
test('Stop (and Esc) stops the server\'s work', async () => {
  // The tiny model fills its 4096 positions in ~4 s: an answer that reached the token limit before
  // the Escape landed proves nothing either way, so that (and only that) is tried once more.
  for (let attempt = 1; ; ++attempt) {
    await until('an idle server', async () => (await metrics(server.url))['llamacpp:requests_processing'] === 0);
    const before = await metrics(server.url);
    await sendMessage(page, 'Count to a million.');
    await until('streaming', async () => Number((await lastAssistant(page).locator('.think-meta').textContent()).split(' ')[0]) > 3);
    await until('the server to run it', async () => (await metrics(server.url))['llamacpp:requests_processing'] === 1);
    await page.keyboard.press('Escape');
    await until('the end of the request', async () => !(await page.isVisible('#stop')));
    const stats = await lastAssistant(page).locator('.stats').textContent();
    if (attempt === 1 && /token limit/.test(stats)) {
      firstChatUserMessages += 1;
      continue;
    }
    await until('the server to stop', async () => {
      const m = await metrics(server.url);
      return m['llamacpp:requests_processing'] === 0 && m.ponder_requests_cancelled_total > before.ponder_requests_cancelled_total;
    });
    assert.match(stats, /stopped/);
    return;
  }
});

test('history survives a reload; search, rename and delete work', async () => {
  await page.click('#new-chat');
  await sendMessage(page, 'A second conversation');
  await page.waitForSelector('.msg.assistant');
  await page.click('#stop');
  await until('idle', async () => !(await page.isVisible('#stop')));
  await page.reload();
  await until('two conversations', async () => (await page.locator('#conversations .conv').count()) === 2);
  assert.deepEqual(await page.locator('.conv-open').allTextContents(), ['A second conversation', 'Why is the sky blue?']);
  await page.locator('.conv-open', { hasText: 'Why is the sky blue?' }).click();
  assert.equal(await page.locator('.msg.user').count(), firstChatUserMessages);
  assert.ok((await page.locator('.msg.assistant .think-body').first().textContent()).length > 0);
  await page.fill('#search', 'sunset');
  await until('the search', async () => (await page.locator('#conversations .conv').count()) === 1);
  await page.fill('#search', '');
  const second = page.locator('.conv', { hasText: 'A second conversation' });
  await second.locator('.conv-rename').click();
  await page.fill('.rename-input', 'Renamed chat');
  await page.press('.rename-input', 'Enter');
  await until('the rename', async () => (await page.locator('.conv-open').allTextContents()).includes('Renamed chat'));
  page.once('dialog', (d) => d.accept());
  await page.locator('.conv', { hasText: 'Renamed chat' }).locator('.conv-delete').click();
  await until('the delete', async () => (await page.locator('#conversations .conv').count()) === 1);
  await page.reload();
  await until('one conversation after reload', async () => (await page.locator('#conversations .conv').count()) === 1);
});

test('edit and resend, regenerate', async () => {
  await page.locator('.conv-open').first().click();
  const users = page.locator('.msg.user');
  await users.first().hover();
  await users.first().locator('.edit').click();
  await page.fill('.edit-area', 'Why is grass green?');
  await page.click('.save-edit');
  await until('the resend', async () => chatRequests.at(-1).body.messages.at(-1).content === 'Why is grass green?').catch((e) => {
    throw new Error(`${e.message}; last request ${JSON.stringify(chatRequests.at(-1))}`);
  });
  assert.equal(chatRequests.at(-1).body.messages.length, 1, 'the later turns are gone');
  await page.click('#stop');
  await until('idle', async () => !(await page.isVisible('#stop')));
  assert.equal(await page.locator('.msg.user').count(), 1);
  const n = chatRequests.length;
  await lastAssistant(page).locator('.regenerate').click();
  await until('the regeneration', async () => chatRequests.length === n + 1);
  assert.equal(chatRequests.at(-1).body.messages.at(-1).content, 'Why is grass green?');
  await page.click('#stop');
  await until('idle', async () => !(await page.isVisible('#stop')));
  assert.equal(await page.locator('.msg.assistant').count(), 1);
});

test('settings are sent and remembered: a reasoning budget of 4 cuts the thinking at 4 tokens', async () => {
  await page.click('#open-settings');
  await page.fill('#settings-form [name=system]', 'You are terse.');
  await page.fill('#settings-form [name=temperature]', '0');
  await page.fill('#settings-form [name=reasoning_budget]', '4');
  await page.fill('#settings-form [name=max_tokens]', '12');
  await page.click('#settings-save');
  await page.click('#new-chat');
  await sendMessage(page, 'Budgeted');
  await until('idle', async () => (await page.isVisible('#send')) && (await page.locator('.msg.assistant .stats').count()) === 1
    && (await lastAssistant(page).locator('.stats').textContent()).length > 0);
  const body = chatRequests.at(-1).body;
  assert.equal(body.messages[0].role, 'system');
  assert.equal(body.reasoning_budget, 4);
  assert.equal(body.temperature, 0);
  assert.equal(body.max_tokens, 12);
  // The server counts the forced "</think>" as a thinking token: 4 + 1.
  assert.match(await lastAssistant(page).locator('.think-meta').textContent(), /^5 tokens/);
  assert.match(await lastAssistant(page).locator('.stats').textContent(), /12 tokens .* prompt \d+ tokens, \d+ from the cache/);
  await page.reload();
  await page.click('#open-settings');
  assert.equal(await page.inputValue('#settings-form [name=reasoning_budget]'), '4');
  assert.equal(await page.inputValue('#settings-form [name=system]'), 'You are terse.');
  await page.fill('#settings-form [name=reasoning_budget]', '');
  await page.fill('#settings-form [name=max_tokens]', '');
  await page.fill('#settings-form [name=system]', '');
  await page.click('#settings-save');
});

test('the same question again comes from the response cache, and says so', async () => {
  await page.click('#open-settings');
  await page.fill('#settings-form [name=max_tokens]', '8');
  await page.fill('#settings-form [name=temperature]', '0');
  await page.click('#settings-save');
  for (let i = 0; i < 2; ++i) {
    await page.click('#new-chat');
    await sendMessage(page, 'What is the capital of France?');
    await until('idle', async () => (await page.isVisible('#send')) && (await lastAssistant(page).locator('.stats').textContent()).length > 0);
  }
  assert.match(await lastAssistant(page).locator('.stats').textContent(), /from the response cache/);
  await page.click('#open-settings');
  await page.fill('#settings-form [name=max_tokens]', '');
  await page.click('#settings-save');
});

const HOSTILE = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>[click](javascript:window.__xss=3)<svg onload="window.__xss=4"></svg>';
const RICH = [
  '# Heading', '', 'Some **bold** and a list:', '', '- one', '- two', '',
  '```python', 'def f(x):', '    return x ** 2', '```', '',
  'Inline $x^2 + y^2$ and \\(\\sqrt{2}\\), prices $5 and $10 stay text.', '',
  '$$\\frac{a}{b}$$', '', '\\[\\boxed{42}\\]', '', 'Code keeps `$not math$` as code.', '', HOSTILE,
].join('\n');

async function assertInert(p) {
  assert.equal(await p.evaluate(() => window.__xss), undefined, 'no injected script ran');
  assert.equal(await p.locator('#messages script, #messages [onerror], #messages [onload]').count(), 0);
  for (const href of await p.locator('#messages a').evaluateAll((as) => as.map((a) => a.getAttribute('href')))) {
    assert.ok(!/^javascript:/i.test(href ?? ''), `a javascript: link survived: ${href}`);
  }
}

test('import renders markdown, code and every math delimiter; hostile text stays inert', async () => {
  const file = join(scratch, 'import.json');
  writeFileSync(file, JSON.stringify({
    format: 'ponder-conversations', version: 1,
    conversations: [{ id: 'imported-1', title: 'Imported', created: 1, updated: Date.now(),
      messages: [{ role: 'user', content: HOSTILE }, { role: 'assistant', content: RICH, reasoning: 'Think $\\alpha$ first.' }] }],
  }));
  await page.setInputFiles('#import-file', file);
  await until('the import', async () => (await page.textContent('#title')) === 'Imported');
  const answer = lastAssistant(page).locator('.answer');
  assert.equal(await answer.locator('h1').textContent(), 'Heading');
  assert.equal(await answer.locator('li').count(), 2);
  assert.ok(await answer.locator('pre code.language-python .hljs-keyword').count() > 0, 'python is highlighted');
  assert.equal(await answer.locator('.katex-display').count(), 2, '$$ and \\[ are display math');
  assert.equal(await answer.locator('.katex').count(), 4, '$x^2$, \\(\\), $$ and \\[ are typeset');
  assert.ok((await answer.textContent()).includes('prices $5 and $10 stay text'));
  assert.equal(await answer.locator('code', { hasText: '$not math$' }).count(), 1);
  assert.equal(await lastAssistant(page).locator('.think-body .katex').count(), 1);
  assert.equal(await page.locator('.msg.user .bubble').textContent(), HOSTILE, 'user text is shown as text');
  await assertInert(page);
  // A tool call R1 wrote as text is a card: the function's name and its arguments pretty-printed;
  // markup in them stays text.
  const toolAnswer = 'Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city":"Paris","days":2,"note":"<img src=x onerror=alert(1)>"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>';
  writeFileSync(join(scratch, 'tool.json'), JSON.stringify({
    format: 'ponder-conversations', version: 1,
    conversations: [{ id: 'tool-1', title: 'Tool', created: 1, updated: Date.now(),
      messages: [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: toolAnswer }] }],
  }));
  await page.setInputFiles('#import-file', join(scratch, 'tool.json'));
  await until('the tool import', async () => (await page.textContent('#title')) === 'Tool');
  const card = lastAssistant(page).locator('.tool-call');
  assert.equal(await card.count(), 1);
  assert.equal(await card.locator('.tool-name').textContent(), 'get_weather');
  assert.deepEqual(JSON.parse(await card.locator('.tool-args').textContent()), { city: 'Paris', days: 2, note: '<img src=x onerror=alert(1)>' });
  assert.ok((await card.locator('.tool-args').textContent()).includes('\n  "city"'), 'pretty-printed');
  assert.equal(await lastAssistant(page).locator('.answer img').count(), 0);
  assert.ok(!(await lastAssistant(page).locator('.answer').textContent()).includes('tool▁calls'), 'no raw markers');
  await shot(page, 'tool-call');
  await page.locator('.conv-open', { hasText: /^Imported$/ }).click();
  await until('the first import again', async () => (await page.textContent('#title')) === 'Imported');
  // The copy button puts the code on the clipboard.
  await answer.locator('.copy-code').click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'def f(x):\n    return x ** 2');
  await shot(page, 'markdown-math-light');
  // Export gives the same conversations back.
  const download = page.waitForEvent('download');
  await page.click('#export');
  const exported = JSON.parse(readFileSync(await (await download).path(), 'utf8'));
  assert.equal(exported.format, 'ponder-conversations');
  assert.ok(exported.conversations.some((c) => c.id === 'imported-1' && c.messages[1].content === RICH));
  // A broken file is refused with a message.
  writeFileSync(file, '{"not": "an export"}');
  await page.setInputFiles('#import-file', file);
  await until('the refusal', async () => /Import failed/.test(await page.textContent('#banner')));
});

test('hostile model output stays inert while it streams', async () => {
  // The one test where the server's answer is scripted: a tiny model cannot be made to write a
  // payload, so the stream (OpenAI's SSE shape) is served by the browser from this fixture.
  const pieces = HOSTILE.match(/.{1,7}/g);
  const sse = pieces.map((p, i) => `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: i < 4 ? { reasoning_content: p } : { content: p }, finish_reason: null }] })}\n\n`).join('')
    + 'data: [DONE]\n\n';
  await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: sse }));
  await page.click('#new-chat');
  await sendMessage(page, 'hostile');
  await until('idle', async () => (await page.locator('.msg.assistant .stats').count()) === 1
    && (await lastAssistant(page).locator('.stats').textContent()).length > 0);
  await page.unroute('**/v1/chat/completions');
  await assertInert(page);
  assert.ok((await lastAssistant(page).locator('.answer').textContent()).length > 0, 'the streamed answer is shown');
});

test('a long prompt shows how far the server has read it', async () => {
  await holdRepliesOpen(page);  // a first token that ends the reply would show no thinking
  await page.click('#new-chat');
  await page.evaluate(() => {
    window.__seen = [];
    new MutationObserver(() => {
      const l = document.querySelector('.msg.assistant:last-of-type .think-label');
      if (l && !window.__seen.includes(l.textContent)) window.__seen.push(l.textContent);
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await sendMessage(page, 'many words '.repeat(1700));
  await until('thinking tokens', async () => (await lastAssistant(page).locator('.think-meta').textContent()).length > 0);
  assert.equal(chatRequests.at(-1).body.return_progress, true);
  const seen = await page.evaluate(() => window.__seen);
  assert.ok(seen.some((t) => /^Reading the prompt… \d+%$/.test(t)), `labels seen: ${seen.join(' | ')}`);
  await page.click('#stop');
  await until('idle', async () => !(await page.isVisible('#stop')));
  await page.unroute('**/v1/chat/completions');
});

test('a failed request shows the server\'s message: a prompt longer than the context', async () => {
  await page.click('#new-chat');
  await sendMessage(page, 'many words '.repeat(3000));
  await until('the error', async () => (await page.locator('.msg-error:visible').count()) === 1);
  assert.match(await lastAssistant(page).locator('.msg-error').textContent(), /The request failed: the prompt has \d+ tokens but the context holds 4096/);
  assert.equal(await page.isVisible('#send'), true);
  await shot(page, 'request-failed');
});

test('the server panel charts live figures from /metrics', async () => {
  await page.click('#toggle-panel');
  await page.click('#new-chat');
  await sendMessage(page, 'Fill the charts');
  await until('a tokens/s figure', async () => parseFloat(await page.locator('[data-chart=tps] .chart-value').textContent()) > 0);
  assert.match(await page.locator('[data-chart=running] .chart-value').textContent(), /^\d+ \/ \d+$/);
  assert.match(await page.locator('[data-chart=kv] .chart-value').textContent(), /^\d+ %$/);
  await shot(page, 'panel-light');
  await page.keyboard.press('Escape');
  await until('idle', async () => !(await page.isVisible('#stop')));
});

test('dark theme and a phone screen', async () => {
  const dark = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'dark' });
  const p = await newPage(dark, server.url);
  await holdRepliesOpen(p);
  await sendMessage(p, 'Dark question');
  await until('an answer', async () => (await p.locator('.msg.assistant .think-meta').textContent()).length > 0);
  await p.click('#answer-now');
  await until('the answer', async () => (await p.locator('.msg.assistant .answer').textContent()).length > 0);
  await p.click('#stop');
  const bg = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(bg, 'rgb(255, 255, 255)');
  await shot(p, 'answered-dark');
  await dark.close();
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: 'light', isMobile: true, hasTouch: true });
  const q = await newPage(phone, server.url);
  await holdRepliesOpen(q);
  assert.equal(await q.isVisible('#open-sidebar'), true);
  const box = await q.locator('#sidebar').boundingBox();
  assert.ok(box.x + box.width <= 0, 'the sidebar is off screen on a phone');
  await sendMessage(q, 'Phone question');
  await until('thinking', async () => (await q.locator('.msg.assistant .think-meta').textContent()).length > 0);
  await q.click('#stop');
  await shot(q, 'phone');
  await q.click('#open-sidebar');
  await until('the sidebar', async () => (await q.locator('#sidebar').boundingBox()).x >= 0);
  await shot(q, 'phone-sidebar');
  await phone.close();
});

test('a server with an API key: the page asks for it, then works', async () => {
  const keyed = await startServer(['--api-key', KEY]);
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const p = await newPage(ctx, keyed.url);
    await p.waitForSelector('#key-dialog[open]');
    await shot(p, 'api-key');
    await p.fill('#key-input', KEY);
    await p.click('#key-save');
    await until('the ready status', async () => /tiny/.test(await p.textContent('#status')));
    await sendMessage(p, 'With a key');
    await until('thinking', async () => (await p.locator('.msg.assistant .think-meta').textContent()).length > 0);
    // Esc, not a click on Stop: the tiny model's answer may already have ended (Stop hidden),
    // and Esc is then a no-op where a click would wait for a button that never shows.
    await p.keyboard.press('Escape');
    await until('the end of the request', async () => !(await p.isVisible('#stop')));
    assert.equal((await metrics(keyed.url, KEY)).ponder_requests_total, 1);
    await ctx.close();
  } finally {
    await stopServer(keyed);
  }
});

test('with several models the page offers a picker, and the chosen model answers', async () => {
  assert.ok(await page.locator('#model-picker').isHidden(), 'one model: no picker');
  const two = await startServer(['--alias', 'first', '-m', model.replace('tiny-Q8_0', 'tiny-Q4_K_M'), '--alias', 'second']);
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const p = await newPage(ctx, two.url);
    await until('the picker', async () => p.locator('#model-picker').isVisible());
    assert.deepEqual(await p.locator('#model-picker option').allTextContents(), ['first', 'second']);
    await p.selectOption('#model-picker', 'second');
    await until('the status names it', async () => /second/.test(await p.textContent('#status')));
    await shot(p, 'model-picker');
    const before = chatRequests.length;
    await sendMessage(p, 'Which model?');
    await until('the request', async () => chatRequests.length > before);
    assert.equal(chatRequests.at(-1).body.model, 'second');
    await until('thinking', async () => (await p.locator('.msg.assistant .think-meta').textContent()).length > 0);
    await p.click('#stop');
    const ps = await (await fetch(`${two.url}/api/ps`)).json();
    assert.deepEqual(ps.models.map((m) => m.name), ['second:latest']);
    await ctx.close();
  } finally {
    await stopServer(two);
  }
});

test('loading (503 from /health) and unreachable states', async () => {
  // ponder serve listens once its model is loaded; a 503 "loading" comes from a proxy or a
  // restart in between, so the page's answer to it is checked with a scripted /health.
  await page.route('**/health', (route) => route.fulfill({ status: 503, contentType: 'application/json', body: '{"status":"loading model"}' }));
  await page.reload();
  await until('the loading banner', async () => /loading the model/.test(await page.textContent('#banner')));
  await shot(page, 'loading');
  await page.unroute('**/health');
  await until('ready again', async () => (await page.locator('#banner').isHidden()));
  await stopServer(server);
  await sendMessage(page, 'Anyone there?');
  await until('the unreachable state', async () => /cannot be reached/.test(await page.textContent('#banner')));
  assert.match(await lastAssistant(page).locator('.msg-error').textContent(), /cannot be reached/);
  await shot(page, 'unreachable');
});

test('no script errors on any page; the CSP reports only the hostile payloads', () => {
  // Parsing a payload's onerror= (DOMPurify's inert parse) makes Chromium report a CSP refusal
  // even though nothing runs: expected in the two hostile tests, nowhere else.
  // The imported hostile conversation is rendered again by each later reload, so reports may
  // come from any test from the import on, never before it.
  const csp = /violates the following Content Security Policy/;
  const firstHostile = testOrder.findIndex((n) => /hostile/.test(n));
  const during = (e) => testOrder.indexOf(e.split(' during ')[1]);
  assert.deepEqual(pageErrors.filter((e) => !/Failed to load resource/.test(e) && !(csp.test(e) && during(e) >= firstHostile)), []);
  assert.ok(pageErrors.some((e) => csp.test(e)), 'the CSP saw the hostile payloads');
});
