/** The comparison page (`infir2 compare --out`): the overlaid charts and the table, self-contained like the report. */
import type { Comparison } from './compare.js';
import { esc, type RenderedChart } from './html.js';

export function compareHtml(c: Comparison, charts: RenderedChart[], generatedAt: string): string {
  const head = `<tr><th>stage</th><th>figure</th>${c.runs.map((r) => `<th>${esc(r)}</th>`).join('')}${c.runs.slice(1).map((r) => `<th>${esc(r)} vs ${esc(c.runs[0])}</th>`).join('')}</tr>`;
  const rows = c.rows
    .map((r) => `<tr data-stage="${esc(r.stage)}" data-metric="${esc(r.metric)}"><td>${esc(r.stage)}</td><td>${esc(r.metric)}</td>${r.values.map((v) => `<td>${v === null ? '–' : esc(Number(v.toPrecision(6)))}</td>`).join('')}${r.vsRef.map((d) => `<td>${esc(d ?? '–')}</td>`).join('')}</tr>`)
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>infir2 compare: ${esc(c.runs.join(' vs '))}</title>
<style>body{font-family:"DejaVu Sans",system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;font-size:14px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f6f6f6}
.warn{background:#fff4e5;border:1px solid #f0c36d;padding:8px 16px}figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:12px}</style></head>
<body>
<h1>infir2 compare: ${esc(c.runs.join(' vs '))}</h1>
<p>generated ${esc(generatedAt)}; every run against the first.</p>
${c.warnings.length ? `<div class="warn"><b>Before reading the figures:</b><ul>${c.warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul></div>` : ''}
${c.notes.length ? `<ul class="notes">${c.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>` : ''}
<table class="compare">${head}
${rows}
</table>
${charts.map((ch) => `<figure class="chart" id="chart-${esc(ch.spec.id)}">${ch.svg}<figcaption>${esc(ch.spec.caption)}${ch.png ? ` <a href="${esc(ch.png)}">PNG</a>` : ''}</figcaption></figure>`).join('\n')}
</body></html>
`;
}
