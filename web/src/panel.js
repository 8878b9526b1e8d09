// The server panel: /metrics polled every second while it is open, drawn as small charts of the
// last two minutes: generation tokens/s, running and queued requests, KV use, and the share of
// prompt tokens from the prefix cache and of answers from the response cache.
import { metrics } from './api.js';

const HISTORY = 120;

const CHARTS = [
  { id: 'tps', title: 'Generation', unit: 't/s', max: null },
  { id: 'running', title: 'Requests running / queued', unit: '', max: null, second: 'queued' },
  { id: 'kv', title: 'KV cache in use', unit: '%', max: 100 },
  { id: 'prefix', title: 'Prompt tokens from the prefix cache', unit: '%', max: 100 },
  { id: 'answers', title: 'Answers from the response cache', unit: '%', max: 100 },
];

function ratio(a, b) {
  return b > 0 ? (100 * a) / b : 0;
}

export class Panel {
  constructor(container, getKey, onError) {
    this.container = container;
    this.getKey = getKey;
    this.onError = onError;
    this.series = Object.fromEntries(CHARTS.map((c) => [c.id, []]));
    this.series.queued = [];
    this.views = {};
    for (const c of CHARTS) {
      const box = document.createElement('figure');
      box.className = 'chart';
      box.dataset.chart = c.id;
      const cap = document.createElement('figcaption');
      const title = document.createElement('span');
      title.textContent = c.title;
      const value = document.createElement('strong');
      value.className = 'chart-value';
      cap.append(title, value);
      const canvas = document.createElement('canvas');
      canvas.width = 240;
      canvas.height = 48;
      canvas.setAttribute('role', 'img');
      canvas.setAttribute('aria-label', c.title);
      box.append(cap, canvas);
      container.append(box);
      this.views[c.id] = { value, canvas, chart: c };
    }
    this.last = null;
    this.timer = null;
  }

  start() {
    if (this.timer) return;
    this.poll();
    this.timer = setInterval(() => this.poll(), 1000);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }

  async poll() {
    let m;
    try {
      m = await metrics(this.getKey());
    } catch (e) {
      this.onError?.(e);
      return;
    }
    const now = performance.now();
    const gen = m['llamacpp:tokens_predicted_total'] ?? 0;
    let tps = 0;
    if (this.last) tps = Math.max(0, (gen - this.last.gen) / ((now - this.last.t) / 1000));
    this.last = { gen, t: now };
    const hits = m.ponder_response_cache_hits_total ?? 0;
    const misses = m.ponder_response_cache_misses_total ?? 0;
    const sample = {
      tps,
      running: m['llamacpp:requests_processing'] ?? 0,
      queued: m['llamacpp:requests_deferred'] ?? 0,
      kv: 100 * (m['llamacpp:kv_cache_usage_ratio'] ?? 0),
      prefix: ratio(m.ponder_prompt_tokens_cached_total ?? 0, m.ponder_prompt_tokens_total ?? 0),
      answers: ratio(hits, hits + misses),
    };
    for (const [k, v] of Object.entries(sample)) {
      const s = this.series[k];
      s.push(v);
      if (s.length > HISTORY) s.shift();
    }
    this.draw(sample);
  }

  draw(sample) {
    const styles = getComputedStyle(document.documentElement);
    const line = styles.getPropertyValue('--accent').trim() || '#3b82f6';
    const line2 = styles.getPropertyValue('--warn').trim() || '#d97706';
    const grid = styles.getPropertyValue('--border').trim() || '#ccc';
    for (const { value, canvas, chart } of Object.values(this.views)) {
      const main = this.series[chart.id];
      const second = chart.second ? this.series[chart.second] : null;
      const v = sample[chart.id];
      value.textContent = chart.second
        ? `${v} / ${sample[chart.second]}`
        : `${v.toFixed(chart.unit === '%' ? 0 : 1)}${chart.unit ? ' ' + chart.unit : ''}`;
      const max = chart.max ?? Math.max(1, ...main, ...(second ?? []));
      const g = canvas.getContext('2d');
      g.clearRect(0, 0, canvas.width, canvas.height);
      g.strokeStyle = grid;
      g.lineWidth = 1;
      g.beginPath();
      g.moveTo(0, canvas.height - 0.5);
      g.lineTo(canvas.width, canvas.height - 0.5);
      g.stroke();
      for (const [s, color] of [[main, line], [second, line2]]) {
        if (!s || s.length < 2) continue;
        g.strokeStyle = color;
        g.lineWidth = 2;
        g.beginPath();
        s.forEach((y, i) => {
          const px = (i / (HISTORY - 1)) * canvas.width;
          const py = canvas.height - 2 - (y / max) * (canvas.height - 4);
          if (i === 0) g.moveTo(px, py);
          else g.lineTo(px, py);
        });
        g.stroke();
      }
    }
  }
}
