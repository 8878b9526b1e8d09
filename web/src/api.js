// Talking to `ponder serve`: the streamed chat (OpenAI's SSE shape with reasoning_content), the
// end-thinking call, /health, /v1/models and /metrics. Errors come back as ApiError with the
// server's own message; a network failure has status 0 ("unreachable").

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(key, conversationId, extraHeaders) {
  const h = { 'Content-Type': 'application/json', ...extraHeaders };
  if (key) h.Authorization = `Bearer ${key}`;
  if (conversationId) h['X-Conversation-Id'] = conversationId;
  return h;
}

async function call(path, { method = 'GET', body, key, conversationId, signal, extraHeaders } = {}) {
  let res;
  try {
    res = await fetch(path, { method, headers: headers(key, conversationId, extraHeaders), body: body && JSON.stringify(body), signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'The server cannot be reached.');
  }
  if (!res.ok) throw new ApiError(res.status, await errorMessage(res));
  return res;
}

async function errorMessage(res) {
  const text = await res.text();
  try {
    const j = JSON.parse(text);
    return j.error?.message ?? j.message ?? text;
  } catch {
    return text || `${res.status} ${res.statusText}`;
  }
}

// Streams one chat completion. onStart(requestId) once the answer begins, onChunk(chunk) per
// parsed SSE event. Resolves at [DONE]; rejects with ApiError or AbortError.
export async function streamChat(body, { key, conversationId, signal, onStart, onChunk }) {
  const res = await call('/v1/chat/completions', { method: 'POST', body, key, conversationId, signal });
  onStart?.(res.headers.get('X-Request-Id'));
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    let part;
    try {
      part = await reader.read();
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'The connection to the server was lost.');
    }
    if (part.done) throw new ApiError(0, 'The answer ended before it was complete.');
    buffer += decoder.decode(part.value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;  // ": keep-alive" comments
        const data = line.slice(6);
        if (data === '[DONE]') return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(500, chunk.error.message ?? 'The server failed during the answer.');
        onChunk(chunk);
      }
    }
  }
}

// Behind a load balancer the id names its replica (chatcmpl-r2-<16 hex>): sent as
// X-Ponder-Replica so that deploy/nginx/ponder.conf routes the call to the replica that runs it.
export function replicaOf(id) {
  return /^chatcmpl-([a-z0-9-]+)-[0-9a-f]{16}$/.exec(id ?? '')?.[1] ?? '';
}

export async function answerNow(id, key) {
  const replica = replicaOf(id);
  await call('/v1/answer_now', { method: 'POST', body: { id }, key, extraHeaders: replica ? { 'X-Ponder-Replica': replica } : {} });
}

// {status: 'ok' | 'loading' | 'draining' | 'unreachable' | 'error', message}
export async function health() {
  let res;
  try {
    res = await fetch('/health', { cache: 'no-store' });
  } catch {
    return { status: 'unreachable', message: 'The server cannot be reached.' };
  }
  if (res.ok) return { status: 'ok' };
  const message = await errorMessage(res);
  if (res.status === 503) return { status: message.includes('draining') ? 'draining' : 'loading', message };
  return { status: 'error', message };
}

export async function models(key) {
  const res = await call('/v1/models', { key });
  return (await res.json()).data ?? [];
}

// Prometheus text -> {name: value} (labels kept in the name).
export async function metrics(key) {
  const res = await call('/metrics', { key });
  const out = {};
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}
