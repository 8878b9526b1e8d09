// Model text -> safe HTML: markdown (marked), code highlighted (highlight.js), math typeset
// (KaTeX) for $$...$$, \[...\], \(...\) and $...$, then everything through DOMPurify. Math is
// tokenized by marked extensions, so it is protected from the markdown rules and never taken
// from inside code. A lone "$" is text: "$5 and $10" stays plain (an inline $...$ must not
// start after or end before a space, nor end before a digit).
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import katex from 'katex';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

for (const [name, lang] of Object.entries({ bash, c, cpp, css, go, java, javascript, json, python, rust, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(['sh', 'shell', 'zsh'], { languageName: 'bash' });
hljs.registerAliases(['js', 'jsx', 'mjs'], { languageName: 'javascript' });
hljs.registerAliases(['ts', 'tsx'], { languageName: 'typescript' });
hljs.registerAliases(['py'], { languageName: 'python' });
hljs.registerAliases(['html', 'svg'], { languageName: 'xml' });
hljs.registerAliases(['c++', 'h', 'hpp', 'cc'], { languageName: 'cpp' });

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]);
}

function typeset(tex, display) {
  return katex.renderToString(tex, { displayMode: display, throwOnError: false, strict: 'ignore', trust: false, maxExpand: 1000, output: 'htmlAndMathml' });
}

// Inline $...$ per the rule above; $$...$$, \(...\), \[...\] anywhere in a paragraph.
function matchMath(src) {
  let m;
  if ((m = /^\$\$([\s\S]+?)\$\$/.exec(src))) return { raw: m[0], tex: m[1], display: true };
  if ((m = /^\\\[([\s\S]+?)\\\]/.exec(src))) return { raw: m[0], tex: m[1], display: true };
  if ((m = /^\\\(([\s\S]+?)\\\)/.exec(src))) return { raw: m[0], tex: m[1], display: false };
  if ((m = /^\$(?!\s)((?:\\.|[^\\$\n])+?)(?<!\s)\$(?!\d)/.exec(src))) return { raw: m[0], tex: m[1], display: false };
  return null;
}

const mathInline = {
  name: 'math',
  level: 'inline',
  start(src) {
    const i = src.search(/\$|\\\(|\\\[/);
    return i < 0 ? undefined : i;
  },
  tokenizer(src) {
    const m = matchMath(src);
    if (m) return { type: 'math', raw: m.raw, tex: m.tex, display: m.display };
    return undefined;
  },
  renderer(token) {
    return typeset(token.tex, token.display);
  },
};

// $$ or \[ opening a block, possibly over several lines.
const mathBlock = {
  name: 'mathBlock',
  level: 'block',
  start(src) {
    const i = src.search(/^ {0,3}(\$\$|\\\[)/m);
    return i < 0 ? undefined : i;
  },
  tokenizer(src) {
    const m = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n|$)/.exec(src);
    if (m) return { type: 'mathBlock', raw: m[0], tex: m[1] ?? m[2] };
    return undefined;
  },
  renderer(token) {
    return `<div class="math-display">${typeset(token.tex, true)}</div>`;
  },
};

const marked = new Marked({
  gfm: true,
  breaks: false,
  extensions: [mathBlock, mathInline],
  renderer: {
    code({ text, lang }) {
      const name = (lang ?? '').trim().split(/\s+/)[0].toLowerCase();
      const known = name && hljs.getLanguage(name);
      const body = known ? hljs.highlight(text, { language: name, ignoreIllegals: true }).value : escapeHtml(text);
      return `<pre><code class="hljs${known ? ` language-${escapeHtml(name)}` : ''}" data-lang="${escapeHtml(name)}">${body}</code></pre>\n`;
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});

const PURIFY = {
  USE_PROFILES: { html: true, svg: true, mathMl: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['id', 'name'],
};

export function renderMarkdown(text) {
  let html;
  try {
    html = marked.parse(text);
  } catch {
    html = `<p>${escapeHtml(text)}</p>`;
  }
  return DOMPurify.sanitize(html, PURIFY);
}

// Adds a header with the language and a Copy button to every code block under root.
export function decorateCode(root, copy) {
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.parentElement?.classList.contains('code-block')) continue;
    const code = pre.querySelector('code');
    const wrap = document.createElement('div');
    wrap.className = 'code-block';
    const head = document.createElement('div');
    head.className = 'code-head';
    const lang = document.createElement('span');
    lang.textContent = code?.dataset.lang || 'text';
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-code';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', 'Copy the code');
    button.addEventListener('click', async () => {
      await copy(code ? code.textContent : pre.textContent);
      button.textContent = 'Copied';
      setTimeout(() => { button.textContent = 'Copy'; }, 1500);
    });
    head.append(lang, button);
    pre.replaceWith(wrap);
    wrap.append(head, pre);
  }
}
