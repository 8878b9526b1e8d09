// The official `openai` npm client, unmodified, against a running `ponder serve`: chat and
// completions, streamed and whole, reasoning deltas, usage, errors, models, the API key.
// Usage: node openai_client.mjs BASE_URL API_KEY (from a folder whose node_modules has openai)
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const messages = [{ role: 'user', content: 'What is two plus two?' }];

const models = await client.models.list();
assert.equal(models.data.length, 1);
const model = models.data[0].id;

const whole = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
assert.equal(whole.object, 'chat.completion');
assert.equal(whole.usage.completion_tokens, 20);
assert.equal(whole.choices[0].finish_reason, 'length');
const msg = whole.choices[0].message;
assert.equal(typeof msg.content, 'string');

let reasoning = '', content = '', usage = null, finish = null;
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    if (ch.delta.reasoning_content) reasoning += ch.delta.reasoning_content;
    if (ch.delta.content) content += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
assert.equal(reasoning, msg.reasoning_content ?? '');
assert.equal(content, msg.content);
assert.equal(finish, 'length');
assert.equal(usage.completion_tokens, 20);
assert.ok(usage.prompt_tokens_details.cached_tokens > 0, 'the second identical prompt reuses the prefix (or the whole answer)');

// The same greedy request again is answered from the response cache, identically.
const again = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
assert.equal(again.usage.response_cached, true);
assert.deepEqual(again.choices, whole.choices);

const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
assert.equal(comp.object, 'text_completion');
assert.equal(comp.usage.completion_tokens, 8);
let text = '';
for await (const chunk of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true })) {
  text += chunk.choices[0]?.text ?? '';
}
assert.equal(text, comp.choices[0].text);

await assert.rejects(client.chat.completions.create({ model, messages, temperature: 'hot' }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: 10000000 }),
  (e) => e.status === 400);
const wrong = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
console.log('openai client: all checks passed');
