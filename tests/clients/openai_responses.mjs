// The Responses API through the official `openai` npm client, unmodified: responses.create
// (output_text, usage, a reasoning item), retrieve / inputItems.list / del, responses.stream (typed events in order, their deltas
// against finalResponse()), responses.parse with a zod text format, a function tool round trip
// through previous_response_id and function_call_output, and refusals. The
// model is a random-weight tiny one: tools are forced with tool_choice, JSON with a schema, and
// reasoning_budget (Ponder's extension) keeps the thinking short.
// Usage: node openai_responses.mjs BASE_URL API_KEY (from a folder whose node_modules has openai
// and zod)
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const model = (await client.models.list()).data[0].id;

// create: cut by max_output_tokens, R1's thinking as a reasoning item.
const whole = await client.responses.create({
  model, input: 'What is two plus two?', instructions: 'Answer briefly.', max_output_tokens: 12, temperature: 0,
});
assert.equal(whole.object, 'response');
assert.match(whole.id, /^resp_/);
assert.equal(whole.status, 'incomplete');
assert.equal(whole.incomplete_details.reason, 'max_output_tokens');
assert.equal(whole.usage.output_tokens, 12);
assert.equal(whole.instructions, 'Answer briefly.');
assert.equal(whole.output[0].type, 'reasoning');
const wholeMessage = whole.output.find((item) => item.type === 'message');
assert.equal(whole.output_text, wholeMessage ? wholeMessage.content[0].text : '');  // the SDK's join

// retrieve gives the stored response back; del removes it.
const got = await client.responses.retrieve(whole.id);
assert.deepEqual(got.output, whole.output);
const inputItems = await client.responses.inputItems.list(whole.id);
assert.equal(inputItems.data.length, 1);
assert.deepEqual(inputItems.data[0].content, [{ type: 'input_text', text: 'What is two plus two?' }]);
await client.responses.del(whole.id);
await assert.rejects(client.responses.retrieve(whole.id), (e) => e instanceof OpenAI.NotFoundError);

// stream + parse with zod: typed events in order, deltas adding up to the final response.
const Person = z.object({ name: z.string().max(6), age: z.number().int().min(0).max(120) });
const params = {
  model, input: 'Describe a person.', max_output_tokens: 300, temperature: 1.0, seed: 2, reasoning_budget: 4,
  text: { format: zodTextFormat(Person, 'person') },
};
const stream = client.responses.stream(params);
const types = [];
let text = '', summary = '', last = -1;
for await (const event of stream) {
  types.push(event.type);
  assert.equal(event.sequence_number, last + 1);
  last = event.sequence_number;
  if (event.type === 'response.output_text.delta') text += event.delta;
  if (event.type === 'response.reasoning_summary_text.delta') summary += event.delta;
}
const final = await stream.finalResponse();
assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
  'response.reasoning_summary_part.added']);
assert.equal(types.at(-1), 'response.completed');
for (const t of ['response.reasoning_summary_text.done', 'response.content_part.added', 'response.output_text.done',
  'response.content_part.done', 'response.output_item.done']) assert.ok(types.includes(t), t);
assert.equal(final.status, 'completed');
assert.equal(final.output[0].summary[0].text, summary);
const message = final.output.find((item) => item.type === 'message');
assert.equal(message.content[0].text, text);
assert.deepEqual(Person.parse(JSON.parse(text)), final.output_parsed);
const parsed = await client.responses.parse({ ...params, seed: 3 });
assert.equal(parsed.status, 'completed');
assert.deepEqual(Person.parse(parsed.output_parsed), parsed.output_parsed);

// A function tool round trip: a forced call, its output sent back with previous_response_id.
const tools = [{
  type: 'function', name: 'get_weather', description: 'Weather of a city', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'], additionalProperties: false },
}];
const first = await client.responses.create({
  model, input: 'Weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 300, temperature: 1.0, seed: 5,
  reasoning_budget: 4,
});
const call = first.output.find((item) => item.type === 'function_call');
assert.ok(call, JSON.stringify(first.output));
assert.equal(call.name, 'get_weather');
assert.equal(typeof JSON.parse(call.arguments).city, 'string');
const second = await client.responses.create({
  model, previous_response_id: first.id, tools, max_output_tokens: 8, temperature: 0,
  input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ celsius: 18 }) }],
});
assert.equal(second.previous_response_id, first.id);
assert.ok(second.usage.input_tokens > first.usage.input_tokens, 'the second turn carries the first');

// Refusals: a built-in tool, an unknown previous response, an unknown parameter, a stray output.
await assert.rejects(client.responses.create({ model, input: 'x', tools: [{ type: 'web_search_preview' }] }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].type' && /web_search_preview/.test(e.message));
await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_nothing' }),
  (e) => e.status === 400 && e.code === 'previous_response_not_found');
await assert.rejects(client.responses.create({ model, input: 'x', frobnicate: 1 }),
  (e) => e.status === 400 && e.code === 'unknown_parameter' && e.param === 'frobnicate');
await assert.rejects(client.responses.create({
  model, input: [{ type: 'function_call_output', call_id: 'call_nothing', output: 'x' }],
}), (e) => e.status === 400 && e.param === 'input[0].call_id');
console.log('openai responses: all checks passed');
