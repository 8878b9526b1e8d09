// The official `@anthropic-ai/sdk` npm client, unmodified, against a running `ponder serve`:
// messages.create and messages.stream (the SDK rebuilds the message from Anthropic's events),
// thinking enabled and disabled, a forced tool call and its result sent back, count_tokens,
// errors in Anthropic's shape and the API key in x-api-key.
// Usage: node anthropic_client.mjs BASE_URL API_KEY (BASE_URL without /v1; from a folder whose
// node_modules has @anthropic-ai/sdk)
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });
const model = 'claude-sonnet-4-5';  // any name: the server answers with its own model
const messages = [{ role: 'user', content: 'What is two plus two?' }];

// A whole message; R1 thinks unless told not to, and its thinking comes as a thinking block.
const whole = await client.messages.create({ model, messages, max_tokens: 20, temperature: 0 });
assert.equal(whole.type, 'message');
assert.equal(whole.role, 'assistant');
assert.match(whole.id, /^msg_/);
assert.equal(whole._request_id, whole.id);  // the request-id header
assert.equal(whole.usage.output_tokens, 20);
assert.equal(whole.stop_reason, 'max_tokens');
assert.ok(whole.usage.input_tokens + whole.usage.cache_read_input_tokens > 5);
assert.equal(whole.content[0].type, 'thinking');
assert.ok(whole.content[0].thinking.length > 0);

// The same request streamed: the SDK's final message equals the whole one, block for block.
const stream = client.messages.stream({ model, messages, max_tokens: 20, temperature: 0 });
const types = [];
for await (const event of stream) types.push(event.type);
const streamed = await stream.finalMessage();
assert.equal(types[0], 'message_start');
assert.equal(types.at(-1), 'message_stop');
assert.ok(types.includes('content_block_delta'));
assert.deepEqual(streamed.content, whole.content);
assert.equal(streamed.stop_reason, 'max_tokens');
assert.equal(streamed.usage.output_tokens, 20);
assert.ok(streamed.usage.cache_read_input_tokens > 0, 'the second identical prompt reuses its prefix');

// Thinking disabled: no thinking block, whole or streamed.
const plain = await client.messages.create({
  model, messages, max_tokens: 12, temperature: 0, thinking: { type: 'disabled' },
});
assert.ok(plain.content.every((b) => b.type !== 'thinking'), JSON.stringify(plain.content));
const plainStream = await client.messages.stream({
  model, messages, max_tokens: 12, temperature: 0, thinking: { type: 'disabled' },
}).finalMessage();
assert.deepEqual(plainStream.content, plain.content);

// Thinking enabled with a budget (Anthropic's minimum 1024, below max_tokens).
const thought = await client.messages.create({
  model, messages, max_tokens: 1100, temperature: 0, thinking: { type: 'enabled', budget_tokens: 1024 },
});
assert.equal(thought.content[0].type, 'thinking');
assert.ok(thought.usage.output_tokens <= 1100);

// A forced tool call (the grammar makes the input valid), whole and streamed, then its result.
const tools = [{
  name: 'get_weather',
  description: 'The weather of a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 12 } },
    required: ['city'],
    additionalProperties: false,
  },
}];
const toolRequest = {
  model, messages: [{ role: 'user', content: 'Weather in Paris?' }], max_tokens: 200, temperature: 0,
  tools, tool_choice: { type: 'tool', name: 'get_weather' }, thinking: { type: 'disabled' },
};
const called = await client.messages.create(toolRequest);
assert.equal(called.stop_reason, 'tool_use');
const use = called.content.at(-1);
assert.equal(use.type, 'tool_use');
assert.equal(use.name, 'get_weather');
assert.match(use.id, /^toolu_/);
assert.equal(typeof use.input.city, 'string');
const calledStream = await client.messages.stream(toolRequest).finalMessage();
assert.equal(calledStream.stop_reason, 'tool_use');
assert.deepEqual(calledStream.content.at(-1).input, use.input);
const answered = await client.messages.create({
  ...toolRequest,
  max_tokens: 8,
  tool_choice: { type: 'auto' },
  messages: [
    ...toolRequest.messages,
    { role: 'assistant', content: called.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny, 21 C' }] },
  ],
});
assert.equal(answered.type, 'message');

// count_tokens: the prompt's tokens, as the message's usage counts them.
const counted = await client.messages.countTokens({ model, messages });
assert.equal(counted.input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens);

// Errors: Anthropic's shape, the SDK's error classes.
await assert.rejects(
  client.messages.create({ model, messages, max_tokens: 100, thinking: { type: 'enabled', budget_tokens: 2048 } }),
  (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error' &&
    /max_tokens/.test(e.message));
await assert.rejects(client.messages.create({ model, messages }),
  (e) => e instanceof Anthropic.BadRequestError && /max_tokens: Field required/.test(e.message));
await assert.rejects(
  client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nope', content: 'x' }] }] }),
  (e) => e instanceof Anthropic.BadRequestError && /tool_use_id/.test(e.message));
const wrong = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
await assert.rejects(wrong.messages.create({ model, messages, max_tokens: 4 }),
  (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
console.log('anthropic client: all checks passed');
