// The AI SDK (`ai`) with its openai-compatible and deepseek providers, unmodified, against a
// running `ponder serve`: generateText / streamText with R1's reasoning, usage with cached
// tokens (DeepSeek's names), generateObject through the structured outputs, a tool call.
// Usage: node ai_sdk_client.mjs BASE_URL API_KEY (from a folder whose node_modules has them)
import assert from 'node:assert/strict';
import { generateText, streamText, generateObject, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createDeepSeek } from '@ai-sdk/deepseek';
import { z } from 'zod';

globalThis.AI_SDK_LOG_WARNINGS = false;  // the deepseek provider's note on temperature
const [baseURL, apiKey] = process.argv.slice(2);
const compat = createOpenAICompatible({ name: 'ponder', baseURL, apiKey, supportsStructuredOutputs: true, includeUsage: true });
const deepseek = createDeepSeek({ baseURL, apiKey });
const prompt = 'What is two plus two?';

// The deepseek provider reads reasoning_content as the reasoning, and DeepSeek's cache fields.
const first = await generateText({ model: deepseek('deepseek-reasoner'), prompt, maxOutputTokens: 16, temperature: 0, maxRetries: 0 });
assert.equal(first.usage.outputTokens, 16);
assert.ok(first.reasoningText && first.reasoningText.length > 0, 'R1 thinks first');
const second = await generateText({ model: deepseek('deepseek-reasoner'), prompt: prompt + ' Briefly.', maxOutputTokens: 4, temperature: 0, maxRetries: 0 });
assert.ok(second.usage.cachedInputTokens > 0, 'the shared prefix is reported as cached');

// The openai-compatible provider, streamed: text and reasoning deltas add up to the whole.
const streamed = streamText({ model: compat('ponder'), prompt, maxOutputTokens: 16, temperature: 0, maxRetries: 0 });
let text = '';
for await (const part of streamed.textStream) text += part;
assert.equal(text, await streamed.text);
assert.equal((await streamed.usage).outputTokens, 16);

// generateObject: a schema the answer must follow (the structured-outputs engine).
const { object } = await generateObject({
  model: compat('ponder'), prompt, temperature: 0, maxRetries: 0,
  schema: z.object({ sum: z.number().int() }),
  providerOptions: { ponder: { reasoning_budget: 8 } },
});
assert.equal(typeof object.sum, 'number');

// A forced tool call comes back parsed against the tool's input schema.
const called = await generateText({
  model: compat('ponder'), prompt: 'Weather in Paris?', temperature: 0, maxRetries: 0,
  tools: { weather: tool({ description: 'The weather in a city', inputSchema: z.object({ city: z.string().max(8) }) }) },
  toolChoice: { type: 'tool', toolName: 'weather' },
  providerOptions: { ponder: { reasoning_budget: 8 } },
});
assert.equal(called.toolCalls.length >= 1, true);
assert.equal(called.toolCalls[0].toolName, 'weather');
assert.equal(typeof called.toolCalls[0].input.city, 'string');
console.log('AI SDK client: all checks passed');
