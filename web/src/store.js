// What the page remembers: conversations in IndexedDB (through idb), settings in localStorage,
// and the JSON format of export / import.
import { openDB } from 'idb';

const dbPromise = openDB('ponder', 1, {
  upgrade(db) {
    db.createObjectStore('conversations', { keyPath: 'id' }).createIndex('updated', 'updated');
  },
});

// An id that works outside secure contexts too (crypto.randomUUID needs one).
export function newId() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export function newConversation() {
  const now = Date.now();
  return { id: newId(), title: 'New chat', created: now, updated: now, messages: [] };
}

export async function listConversations() {
  return (await (await dbPromise).getAllFromIndex('conversations', 'updated')).reverse();
}

export async function saveConversation(c) {
  c.updated = Date.now();
  await (await dbPromise).put('conversations', structuredClone(c));
}

export async function deleteConversation(id) {
  await (await dbPromise).delete('conversations', id);
}

const FORMAT = 'ponder-conversations';

export function exportJson(conversations) {
  return JSON.stringify({ format: FORMAT, version: 1, exported: new Date().toISOString(), conversations }, null, 2);
}

// Parses an export; throws an Error that says what is wrong with the file.
export function parseImport(text) {
  let j;
  try {
    j = JSON.parse(text);
  } catch {
    throw new Error('The file is not JSON.');
  }
  if (j?.format !== FORMAT || !Array.isArray(j.conversations)) throw new Error('The file is not a Ponder export.');
  return j.conversations.map((c, i) => {
    if (typeof c?.id !== 'string' || !Array.isArray(c.messages)) throw new Error(`Conversation ${i + 1} has no id or messages.`);
    const messages = c.messages.map((m) => {
      if (!['user', 'assistant'].includes(m?.role) || typeof m.content !== 'string') {
        throw new Error(`Conversation ${i + 1} has a message that is not a user or assistant text.`);
      }
      return { role: m.role, content: m.content, reasoning: typeof m.reasoning === 'string' ? m.reasoning : '', stats: m.stats ?? null };
    });
    const now = Date.now();
    return { id: c.id, title: String(c.title ?? 'Imported chat').slice(0, 200), created: Number(c.created) || now, updated: Number(c.updated) || now, messages };
  });
}

const SETTINGS_KEY = 'ponder.settings';
export const defaultSettings = { system: '', temperature: 0.6, top_p: 0.95, max_tokens: '', reasoning_budget: '', api_key: '', model: '' };

export function loadSettings() {
  try {
    return { ...defaultSettings, ...JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? '{}') };
  } catch {
    return { ...defaultSettings };
  }
}

export function saveSettings(s) {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(s));
}
