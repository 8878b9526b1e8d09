// The `ollama` npm client (ollama-js), unmodified, against a running `ponder serve`: chat and
// generate, streamed and whole, think true / false / an effort, format as a JSON Schema, the
// load / unload idiom, list / ps / show / version, and errors that read as text.
// Usage: node ollama_client.mjs BASE_URL API_KEY (from a folder whose node_modules has ollama)
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';

const [host, apiKey] = process.argv.slice(2);
const ollama = new Ollama({ host, headers: { Authorization: `Bearer ${apiKey}` } });

const tags = await ollama.list();
assert.equal(tags.models.length, 1);
const model = tags.models[0].name;
assert.ok(tags.models[0].size > 0, 'the file size');
assert.ok(tags.models[0].details.quantization_level.length > 0, 'the quantization level');

const messages = [{ role: 'user', content: 'What is two plus two?' }];
const options = { temperature: 0, num_predict: 12 };

// Whole and streamed say the same.
const whole = await ollama.chat({ model, messages, options, stream: false, think: true });
assert.equal(whole.done, true);
assert.equal(whole.eval_count, 12);
let thinking = '', content = '', last = null;
for await (const part of await ollama.chat({ model, messages, options, stream: true, think: true })) {
  thinking += part.message.thinking ?? '';
  content += part.message.content;
  last = part;
}
assert.equal(last.done, true);
assert.equal(thinking, whole.message.thinking ?? '');
assert.equal(content, whole.message.content);

// think false: no thinking phase at all (not a hidden one): the answer's tokens come at once.
const plain = await ollama.chat({ model, messages, options: { ...options, seed: 1 }, stream: false, think: false });
assert.equal(plain.message.thinking, undefined);
assert.equal(plain.eval_count, 12);
// think "low": a thinking budget (ollama-js's own type for the effort).
const low = await ollama.chat({ model, messages, options, stream: false, think: 'low' });
assert.equal(low.done, true);

// format as a JSON Schema: the answer parses and follows it.
const schema = { type: 'object', properties: { sum: { type: 'integer' } }, required: ['sum'], additionalProperties: false };
const structured = await ollama.chat({ model, messages, format: schema, stream: false, options: { temperature: 0, num_predict: 300, reasoning_budget: 8 } });
assert.equal(structured.done_reason, 'stop');
assert.equal(typeof JSON.parse(structured.message.content).sum, 'number');

const gen = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options: { temperature: 0, num_predict: 5 } });
assert.equal(gen.eval_count, 5);

// The load / unload idiom answers at once.
const load = await ollama.generate({ model, prompt: '' });
assert.equal(load.done_reason, 'load');
const unload = await ollama.generate({ model, prompt: '', keep_alive: 0 });
assert.equal(unload.done_reason, 'unload');

const show = await ollama.show({ model });
assert.ok(show.model_info['general.architecture'] === 'qwen2');
assert.ok(show.template.length > 0, 'the template text');
assert.ok(show.capabilities.includes('thinking'));
assert.equal((await ollama.ps()).models.length, 1);

// Errors are Ollama's {"error": "..."}: ollama-js shows the text, not [object Object].
await assert.rejects(ollama.chat({ model, messages, options: { num_gpu: 4 } }),
  (e) => e.status_code === 400 && /num_gpu/.test(e.message));
await assert.rejects(ollama.show({ model: 'no-such-model' }),
  (e) => e.status_code === 404 && /not found/.test(e.message));
await assert.rejects(ollama.chat({ model, messages, keep_alive: 'soon' }),
  (e) => e.status_code === 400 && /keep_alive/.test(e.message));
console.log('ollama client: all checks passed');
