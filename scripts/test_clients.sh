#!/usr/bin/env bash
# Real clients against a real `ponder serve` on a loopback port: curl (SSE framing, errors), the
# official `openai` npm package (tests/clients/openai_client.mjs; structured outputs and tool
# calls in tests/clients/openai_structured.mjs, with zod and ajv; the Responses API in
# tests/clients/openai_responses.mjs), ollama-js, the AI SDK (its openai-compatible and deepseek
# providers), LangChain's ChatOpenAI and the official `@anthropic-ai/sdk`
# (tests/clients/anthropic_client.mjs, /v1/messages). Stops what it starts.
# Usage: scripts/test_clients.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODEL=../shared/models/tiny-Q8_0.gguf
# The client libraries people use, at the major versions their docs show today.
NPM_CLIENTS=(openai@4 zod@3 ajv@8 ollama@0.5 ai@5 @ai-sdk/openai-compatible@1 @ai-sdk/deepseek@1
  @langchain/openai@0.6 @langchain/core@0.3 @anthropic-ai/sdk@1)
for dir in openai zod ajv ollama ai @ai-sdk/openai-compatible @ai-sdk/deepseek @langchain/openai @langchain/core \
  @anthropic-ai/sdk; do
  [ -d "build-npm/node_modules/$dir" ] || { npm install --silent --no-audit --no-fund --prefix build-npm "${NPM_CLIENTS[@]}"; break; }
done
KEY=test-key-$$
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
CACHE=$(mktemp -d)
"$BUILD/ponder" serve -m "$MODEL" --port "$PORT" --api-key "$KEY" -c 2048 --cache-dir "$CACHE" > "$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$LOG" "$CACHE"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
URL=http://127.0.0.1:$PORT
AUTH=(-H "Authorization: Bearer $KEY")
fail() { echo "test_clients: FAILED: $*"; cat "$LOG"; exit 1; }

# curl: a streamed chat ends with [DONE], carries reasoning_content, and usage when asked.
out=$(curl -sfN "${AUTH[@]}" "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}')
grep -q '^data: \[DONE\]$' <<< "$out" || fail "no [DONE] in the stream"
grep -q '"reasoning_content"' <<< "$out" || fail "no reasoning_content delta"
grep -q '"completion_tokens":6' <<< "$out" || fail "no usage chunk"
# curl: errors have OpenAI's shape and status.
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models") ; [ "$code" = 401 ] || fail "no key gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" "$URL/v1/chat/completions" -d '{') ; [ "$code" = 400 ] || fail "bad JSON gave $code"
curl -sf "$URL/health" | grep -q '"ok"' || fail "health"
# Another address than loopback without a key is refused before anything is loaded.
if timeout 10 "$BUILD/ponder" serve -m "$MODEL" --host 0.0.0.0 --port 0 > /dev/null 2> "$LOG.refused"; then fail "--host 0.0.0.0 without a key was accepted"; fi
grep -q -- "--api-key" "$LOG.refused" || fail "the refusal does not name --api-key"
rm -f "$LOG.refused"
# curl: Ollama's format (a schema) gives a JSON answer; a keyword Ponder does not support is a 400.
out=$(curl -sf "${AUTH[@]}" "$URL/api/chat" -d '{"model":"tiny","stream":false,"messages":[{"role":"user","content":"Hi"}],"format":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false},"options":{"temperature":0,"num_predict":200,"reasoning_budget":4}}')
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["done_reason"] == "stop", r; assert isinstance(json.loads(r["message"]["content"])["ok"], bool), r' "$out" || fail "Ollama format"
code=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" "$URL/api/chat" -d '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"format":{"type":"object","not":{}}}')
[ "$code" = 400 ] || fail "an unsupported schema keyword in format gave $code"
echo "curl: all checks passed"

# ES modules resolve packages from the script's own folder: run a copy beside build-npm/node_modules.
client() {  # client SCRIPT BASE_URL WHAT
  cp "tests/clients/$1" build-npm/
  node "build-npm/$1" "$2" "$KEY" || fail "$3"
}
client openai_client.mjs "$URL/v1" "openai client"
client openai_structured.mjs "$URL/v1" "openai structured outputs and tools"
client ollama_client.mjs "$URL" "ollama client"
client ai_sdk_client.mjs "$URL/v1" "AI SDK client"
client langchain_client.mjs "$URL/v1" "LangChain client"
client openai_responses.mjs "$URL/v1" "openai responses"
client anthropic_client.mjs "$URL" "anthropic client"
kill -TERM $PID
wait $PID || fail "ponder serve did not exit cleanly on SIGTERM"
grep -q draining "$LOG" || fail "no drain on SIGTERM"
echo "test_clients: all passed"
