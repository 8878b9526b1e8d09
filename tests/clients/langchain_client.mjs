// LangChain's ChatOpenAI (@langchain/openai), unmodified, against a running `ponder serve`:
// invoke and stream, withStructuredOutput (a zod schema through the structured outputs),
// bindTools with a forced tool call.
// Usage: node langchain_client.mjs BASE_URL API_KEY (from a folder whose node_modules has them)
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const [baseURL, apiKey] = process.argv.slice(2);
const llm = new ChatOpenAI({
  model: 'ponder', apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 12, maxRetries: 0,
  modelKwargs: { reasoning_budget: 8 },
});

const whole = await llm.invoke('What is two plus two?');
assert.equal(typeof whole.content, 'string');
assert.equal(whole.usage_metadata.output_tokens, 12);
let streamed = '';
for await (const chunk of await llm.stream('What is two plus two?')) streamed += chunk.content;
assert.equal(streamed, whole.content);

const structured = new ChatOpenAI({
  model: 'ponder', apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 300, maxRetries: 0,
  modelKwargs: { reasoning_budget: 8 },
}).withStructuredOutput(z.object({ sum: z.number().int() }), { name: 'answer', method: 'jsonSchema' });
const answer = await structured.invoke('What is two plus two?');
assert.equal(typeof answer.sum, 'number');

const withTools = new ChatOpenAI({
  model: 'ponder', apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 300, maxRetries: 0,
  modelKwargs: { reasoning_budget: 8 },
}).bindTools([{ type: 'function', function: { name: 'weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false } } }],
{ tool_choice: { type: 'function', function: { name: 'weather' } } });
const call = await withTools.invoke('Weather in Paris?');
assert.equal(call.tool_calls.length >= 1, true);
assert.equal(call.tool_calls[0].name, 'weather');
assert.equal(typeof call.tool_calls[0].args.city, 'string');
console.log('LangChain client: all checks passed');
