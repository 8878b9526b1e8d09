// Structured outputs and tool calls through the official `openai` npm client, unmodified:
// chat.completions.parse with a zod schema (every answer, sampled at temperature 1, checked by
// ajv against the JSON Schema the SDK sent), the runTools loop, and streamed tool calls
// assembled by the SDK's stream helper. The model is a random-weight tiny one: the schemas are
// bounded (maxLength, maxItems) because random weights rarely close an unbounded string.
// Usage: node openai_structured.mjs BASE_URL API_KEY (from a folder whose node_modules has
// openai, zod and ajv)
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { z } from 'zod';
import Ajv from 'ajv';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
const messages = [{ role: 'user', content: 'Describe a person.' }];

// parse + zod: n choices a request, each validated by ajv against the schema the SDK sent.
const Person = z.object({
  name: z.string().max(8),
  age: z.number().int().min(0).max(120),
  tags: z.array(z.enum(['kind', 'tall', 'wise'])).max(2),
  nickname: z.string().max(6).nullable(),
});
const format = zodResponseFormat(Person, 'person');
const validate = new Ajv({ strict: false }).compile(format.json_schema.schema);
let checked = 0;
for (let seed = 0; seed < 50; ++seed) {
  const r = await client.beta.chat.completions.parse({
    model, messages, response_format: format, temperature: 1.0, seed, n: 4, max_tokens: 400, reasoning_budget: 4,
  });
  for (const choice of r.choices) {
    assert.equal(choice.finish_reason, 'stop', JSON.stringify(choice));
    const value = JSON.parse(choice.message.content);
    assert.ok(validate(value), `${choice.message.content}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(choice.message.parsed, value);
    checked++;
  }
}
assert.equal(checked, 200);

// json_object: any JSON object.
const obj = await client.chat.completions.create({
  model, messages, response_format: { type: 'json_object' }, temperature: 0, max_tokens: 200, reasoning_budget: 4,
});
if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(obj.choices[0].message.content), 'object');

// A schema keyword Ponder does not support is refused by name.
await assert.rejects(
  client.chat.completions.create({
    model, messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } },
  }),
  (e) => e.status === 400 && e.param === 'response_format' && /uniqueItems/.test(e.message));

// The runTools loop: a call to the named function, its arguments parsed by zod, the result sent
// back as a tool message, and the model's next turn.
const calls = [];
const runner = client.beta.chat.completions.runTools({
  model, temperature: 1.0, seed: 5, max_tokens: 300, reasoning_budget: 4,
  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  tools: [zodFunction({
    name: 'get_weather',
    parameters: z.object({ city: z.string().max(10), days: z.number().int().min(1).max(7) }),
    function: (args) => { calls.push(args); return { temperature_c: 18, sky: 'sunny' }; },
  })],
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
});
await runner.done();
assert.equal(calls.length, 1);
assert.equal(typeof calls[0].city, 'string');
assert.ok(calls[0].days >= 1 && calls[0].days <= 7);
const toolMessages = runner.messages.filter((m) => m.role === 'tool');
assert.equal(toolMessages.length, 1);

// Streamed tool calls assembled by the SDK equal the whole answer's.
const tools = [{
  type: 'function',
  function: {
    name: 'lookup', description: 'Look a word up',
    parameters: { type: 'object', properties: { word: { type: 'string', maxLength: 12 } }, required: ['word'], additionalProperties: false },
  },
}];
const req = { model, messages, tools, tool_choice: 'required', temperature: 1.0, seed: 9, max_tokens: 300, reasoning_budget: 4 };
const whole = await client.chat.completions.create(req);
assert.equal(whole.choices[0].finish_reason, 'tool_calls');
const stream = client.beta.chat.completions.stream(req);
const streamed = await stream.finalChatCompletion();
const a = whole.choices[0].message.tool_calls, b = streamed.choices[0].message.tool_calls;
assert.equal(b.length, a.length);
assert.equal(b[0].function.name, 'lookup');
assert.deepEqual(JSON.parse(b[0].function.arguments), JSON.parse(a[0].function.arguments));
assert.ok(b[0].id.startsWith('call_'));
assert.equal(streamed.choices[0].finish_reason, 'tool_calls');

// A tool_choice naming an absent function is a 400 naming the field.
await assert.rejects(client.chat.completions.create({ ...req, tool_choice: { type: 'function', function: { name: 'nope' } } }),
  (e) => e.status === 400 && e.param === 'tool_choice');
console.log(`openai structured: all checks passed (${checked} parsed answers valid by ajv)`);
