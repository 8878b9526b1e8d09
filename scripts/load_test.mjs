#!/usr/bin/env node
// Load generator for any OpenAI-compatible server (ponder serve, llama-server, vLLM, ...): N
// concurrent streaming chat clients, each a distinct prompt of about --prompt words and --gen
// generated tokens (end of sequence ignored), for every N in --clients. Reports time to first
// token p50/p95, per-request latency p50/p95, aggregate generated tokens/s and errors, as a table
// and (--json) as JSON. Uses Node's own fetch: no packages.
// Usage: node scripts/load_test.mjs --url http://127.0.0.1:8080 [--clients 1,4,8] [--prompt 100]
//        [--gen 64] [--key KEY] [--json]
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : 'true']);
  return acc;
}, []));
const url = (args.url ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const clients = (args.clients ?? '1,4,8').split(',').map(Number);
const nWords = Number(args.prompt ?? 100);
const nGen = Number(args.gen ?? 64);
const headers = { 'Content-Type': 'application/json', ...(args.key ? { Authorization: `Bearer ${args.key}` } : {}) };
const vocab = 'time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education'.split(' ');

function prompt(seed) {
  let x = seed * 2654435761 % 4294967296;
  const words = [];
  for (let i = 0; i < nWords; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    words.push(vocab[x % vocab.length]);
  }
  return `Request ${seed}: ${words.join(' ')}`;
}

async function one(seed, t0) {
  const body = { model: 'any', messages: [{ role: 'user', content: prompt(seed) }], max_tokens: nGen, temperature: 0,
    ignore_eos: true, stream: true, stream_options: { include_usage: true } };
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null, chunks = 0, usage = null, buf = '';
  const decoder = new TextDecoder();
  for await (const piece of res.body) {
    buf += decoder.decode(piece, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const c = JSON.parse(event.slice(6));
      if (c.usage) usage = c.usage;
      const d = c.choices?.[0]?.delta;
      if (d && (d.content || d.reasoning_content || d.reasoning)) {
        chunks++;
        if (ttft === null) ttft = (performance.now() - t0) / 1000;
      }
    }
  }
  return { ttft, latency: (performance.now() - t0) / 1000, tokens: usage?.completion_tokens ?? chunks };
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const results = [];
let seedBase = Math.floor(Math.random() * 1e6);
for (const n of clients) {
  const t0 = performance.now();
  const runs = await Promise.allSettled(Array.from({ length: n }, (_, i) => one(seedBase + i, t0)));
  seedBase += n;
  const wall = (performance.now() - t0) / 1000;
  const ok = runs.filter((r) => r.status === 'fulfilled').map((r) => r.value);
  const errors = runs.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
  const tokens = ok.reduce((a, r) => a + r.tokens, 0);
  results.push({ clients: n, ttft_p50_s: pct(ok.map((r) => r.ttft), 0.5), ttft_p95_s: pct(ok.map((r) => r.ttft), 0.95),
    latency_p50_s: pct(ok.map((r) => r.latency), 0.5), latency_p95_s: pct(ok.map((r) => r.latency), 0.95),
    tokens, tokens_per_s: tokens / wall, wall_s: wall, errors: errors.length, first_error: errors[0] });
}
if (args.json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  console.log('| clients | TTFT p50 / p95 (s) | latency p50 / p95 (s) | tokens/s | errors |');
  console.log('|---|---|---|---|---|');
  for (const r of results) {
    const f = (x) => (x ?? NaN).toFixed(2);
    console.log(`| ${r.clients} | ${f(r.ttft_p50_s)} / ${f(r.ttft_p95_s)} | ${f(r.latency_p50_s)} / ${f(r.latency_p95_s)} | ${r.tokens_per_s.toFixed(1)} | ${r.errors}${r.first_error ? ' (' + r.first_error.slice(0, 80) + ')' : ''} |`);
  }
}
