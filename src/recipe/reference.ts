/**
 * The recipe reference, read off the zod schema: one row per field with its type, default and meaning (the
 * field's `.describe()` text). `docs/recipe-reference.md` is rendered from these rows, so the page cannot
 * drift from what `infir2 validate` accepts.
 */
import { z } from 'zod';
import { fieldTypeName } from './fields.js';
import { zodDef } from './schema-walk.js';

export interface FieldDoc {
  /** Dotted path: `[]` stands for any list item, `<name>` for any key of a mapping. */
  path: string;
  type: string;
  /** `required`, `–` (optional, no default) or the default in backticks. */
  default: string;
  meaning: string;
}

const def = zodDef;

/** A field peeled of its wrappers: what the wrappers say (optional, default, description) and the core type. */
interface Peeled {
  core: z.ZodType;
  optional: boolean;
  nullable: boolean;
  defaulted?: { value: unknown };
  description?: string;
  typeName?: string;
}

function peel(s: z.ZodType): Peeled {
  const p: Partial<Peeled> & { optional: boolean; nullable: boolean } = { optional: false, nullable: false };
  for (;;) {
    // Outer layers win: `.describe()` is written last, after `.default()`.
    p.description ??= z.globalRegistry.get(s)?.description;
    p.typeName ??= fieldTypeName(s);
    const d = def(s);
    if (d.type === 'optional') p.optional = true;
    else if (d.type === 'nullable') p.nullable = true;
    else if (d.type === 'default' || d.type === 'prefault') p.defaulted ??= { value: d.defaultValue };
    else if (d.type !== 'pipe') return { ...p, core: s };
    s = (d.type === 'pipe' ? d.in : d.innerType)!;
  }
}

const code = (v: unknown) => `\`${typeof v === 'string' ? v : JSON.stringify(v)}\``;

function typeOf(p: Peeled): string {
  const t = p.typeName ?? coreType(p.core);
  return p.nullable ? `${t} or \`null\`` : t;
}

function coreType(s: z.ZodType): string {
  const d = def(s);
  switch (d.type) {
    case 'object':
      return 'mapping';
    case 'array': {
      const item = peel(d.element!);
      const itemType = def(item.core).type;
      if (itemType === 'object') return 'list of mappings';
      if (itemType === 'enum') return `list of ${enumValues(item.core).join(', ')}`;
      return `list of ${typeOf(item)}${itemType === 'string' && !item.typeName ? 's' : ''}`;
    }
    case 'record': {
      const value = peel(d.valueType!);
      const valueType = def(value.core).type === 'object' ? 'mapping' : typeOf(value);
      return `mapping of ${typeOf(peel(d.keyType!))} → ${valueType}`;
    }
    case 'enum': {
      const values = enumValues(s);
      return values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`;
    }
    case 'union':
      return (d.options ?? []).map((o) => typeOf(peel(o))).join(' or ');
    case 'unknown':
      return 'any';
    default:
      return d.type; // string, number, boolean
  }
}

const enumValues = (s: z.ZodType) => Object.values(def(s).entries ?? {}).map(code);

function defaultOf(p: Peeled): string {
  if (p.defaulted) {
    const v = p.defaulted.value;
    // `.prefault({})` on a mapping: its fields' own defaults apply.
    if (def(p.core).type === 'object' && typeof v === 'object' && v !== null && Object.keys(v).length === 0) return 'see its fields';
    return code(v);
  }
  return p.optional ? '–' : 'required';
}

/**
 * Every field under `schema`, depth first, parents before children. A mapping whose fields were already listed
 * (one schema shared by several stages, or `.partial()` of one) gets a single row naming where they are.
 */
export function fieldDocs(schema: z.ZodType): FieldDoc[] {
  const rows: FieldDoc[] = [];
  const owners = new Map<z.ZodType, string>(); // a field's core schema → the mapping that listed it
  const walk = (s: z.ZodType, prefix: string) => {
    for (const [key, field] of Object.entries(def(s).shape ?? {})) {
      const path = prefix ? `${prefix}.${key}` : key;
      const p = peel(field);
      const row: FieldDoc = { path, type: typeOf(p), default: defaultOf(p), meaning: p.description ?? '' };
      rows.push(row);
      const nested = nestedObject(p.core, path);
      if (!nested) continue;
      const children = Object.values(def(nested.schema).shape ?? {}).map((c) => peel(c).core);
      const owner = children.length ? owners.get(children[0]!) : undefined;
      if (owner !== undefined && children.every((c) => owners.get(c) === owner)) {
        row.type = `${row.type}: the fields of \`${owner}\``;
        continue;
      }
      for (const c of children) owners.set(c, nested.path);
      walk(nested.schema, nested.path);
    }
  };
  walk(peel(schema).core, '');
  return rows;
}

/** The mapping schema a field opens into (itself, a list's items, a mapping's values), with its path. */
function nestedObject(core: z.ZodType, path: string): { schema: z.ZodType; path: string } | undefined {
  const d = def(core);
  if (d.type === 'object') return { schema: core, path };
  const item = d.type === 'array' ? d.element : d.type === 'record' ? d.valueType : undefined;
  if (!item) return undefined;
  const inner = peel(item).core;
  if (def(inner).type !== 'object') return undefined;
  return { schema: inner, path: d.type === 'array' ? `${path}[]` : `${path}.<name>` };
}

/** The schema under `path` (as written in FieldDoc paths), or undefined. */
export function schemaAtDocPath(root: z.ZodType, path: string): z.ZodType | undefined {
  let s: z.ZodType | undefined = peel(root).core;
  if (path === '') return s;
  for (const part of path.split('.')) {
    const m = /^(<name>|[A-Za-z0-9]+)(\[\])?$/.exec(part);
    if (!s || !m) return undefined;
    const d = def(s);
    if (m[1] === '<name>') s = d.type === 'record' ? peel(d.valueType!).core : undefined;
    else s = d.type === 'object' && d.shape?.[m[1]!] ? peel(d.shape[m[1]!]!).core : undefined;
    if (s && m[2]) s = def(s).type === 'array' ? peel(def(s).element!).core : undefined;
  }
  return s;
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

export function fieldTable(rows: readonly FieldDoc[], prefix: string): string {
  const rel = (p: string) => (prefix && p.startsWith(`${prefix}.`) ? p.slice(prefix.length + 1) : p);
  return [
    '| key | type | default | meaning |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| \`${rel(r.path)}\` | ${cell(r.type)} | ${cell(r.default)} | ${cell(r.meaning)} |`),
  ].join('\n');
}
