/**
 * Text from someone else (a trainer's output, a run directory's files, a recipe's values) made safe to show on a
 * terminal or a page: every control character written out as an escape (`ESC ]0;…BEL` → `\x1b]0;…\x07`), so
 * that a log line cannot retitle or clear a terminal, move its cursor, hide text or ring it; and the Unicode
 * direction overrides and isolates (U+202A–U+202E, U+2066–U+2069), which reorder what a reader sees
 * ("Trojan Source"). Tab stays. Newlines are written out too: what is shown as one line stays one line.
 */

// C0 controls but tab, DEL, C1 controls (0x9b is a one-byte CSI to some terminals), bidi overrides/isolates.
const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function escape(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `s` with its control characters (and direction overrides) visibly escaped. */
export function visible(s: string): string {
  return s.replace(UNSAFE, escape);
}

/** Lines for a terminal: each made visible, newlines kept between them. */
export function visibleLines(text: string): string {
  return text.split('\n').map(visible).join('\n');
}

/**
 * JSON for a terminal: JSON.stringify already escapes the C0 controls; DEL, the C1 controls and the direction
 * overrides are written as `\uXXXX` too (the same JSON value).
 */
export function visibleJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(/[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
