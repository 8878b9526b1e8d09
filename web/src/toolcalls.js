// R1's tool calls in an answer, shown readably: the model writes them as plain text
// (<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...,
// docs/tool-calls.md). splitToolCalls() takes them out of the text (whole or still streaming);
// toolCallView() is one call as a card: the function's name and its arguments, pretty-printed.
const CALLS_BEGIN = '<｜tool▁calls▁begin｜>';
const CALL_BEGIN = '<｜tool▁call▁begin｜>';
const CALL_END = '<｜tool▁call▁end｜>';
const CALLS_END = '<｜tool▁calls▁end｜>';
const SEP = '<｜tool▁sep｜>';

// { text, calls: [{ name, arguments }] }: the text before the first marker, and each call.
export function splitToolCalls(content) {
  let start = content.indexOf(CALLS_BEGIN);
  if (start < 0) start = content.indexOf(CALL_BEGIN);
  if (start < 0) return { text: content, calls: [] };
  const calls = [];
  let rest = content.slice(start).replace(CALLS_BEGIN, '');
  const stop = rest.indexOf(CALLS_END);
  if (stop >= 0) rest = rest.slice(0, stop);
  for (const part of rest.split(CALL_BEGIN).slice(1)) {
    const body = part.split(CALL_END)[0];
    const nl = body.indexOf('\n');
    const header = nl < 0 ? body : body.slice(0, nl);
    const name = (header.includes(SEP) ? header.slice(header.indexOf(SEP) + SEP.length) : header).trim();
    let args = nl < 0 ? '' : body.slice(nl + 1);
    args = args.replace(/^```[a-z]*\n?/, '').replace(/\n?```\s*$/, '');
    if (name) calls.push({ name, arguments: args });
  }
  return { text: content.slice(0, start).trimEnd(), calls };
}

function pretty(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;  // still streaming, or not JSON: as written
  }
}

export function toolCallView(call) {
  const card = document.createElement('div');
  card.className = 'tool-call';
  const head = document.createElement('div');
  head.className = 'tool-head';
  const label = document.createElement('span');
  label.className = 'tool-label';
  label.textContent = 'Tool call';
  const name = document.createElement('code');
  name.className = 'tool-name';
  name.textContent = call.name;  // text, never HTML
  head.append(label, name);
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  code.className = 'tool-args';
  code.textContent = pretty(call.arguments);
  pre.append(code);
  card.append(head, pre);
  return card;
}
