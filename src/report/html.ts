/**
 * The report page: one self-contained HTML file (inline CSS, the charts as inline SVG; no script, no network),
 * with the run's stage table, charts, evaluation table, failures and parameters. Pure: data in, a string out.
 * Cells carry `data-*` attributes naming the figure they show, so a test can compare them with the logs.
 */
import { visible } from '../util/visible.js';
import { shownRecipeValue, WEBHOOK_URL_PATH } from '../plan/notify-spec.js';
import { formatScore } from '../views/step-figures.js';
import type { ChartSpec } from './line-chart.js';
import { parityVerdict } from './parity.js';
import type { RunData, StepReport } from './run-data.js';

export interface RenderedChart {
  spec: ChartSpec;
  svg: string;
  /** The PNG's path relative to the page, when one was written. */
  png: string | null;
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for the page: control characters written out (util/visible.ts), then HTML's specials escaped. */
export const esc = (s: unknown): string => visible(String(s)).replace(/[&<>"']/g, (c) => ESC[c]!);

const num = (x: number | null | undefined, digits = 4): string => (x === null || x === undefined ? '–' : Number(x.toPrecision(digits)).toString());
const secs = (x: number | null | undefined): string => {
  if (x === null || x === undefined) return '–';
  if (x < 90) return `${x.toFixed(1)} s`;
  if (x < 5400) return `${(x / 60).toFixed(1)} min`;
  return `${(x / 3600).toFixed(2)} h`;
};

/** The recipe as `a.b.c = value` rows (lists of objects by index), for the parameters table. */
export function flatten(value: unknown, prefix = ''): [string, string][] {
  if (value === null || typeof value !== 'object') return [[prefix, JSON.stringify(value) ?? 'null']];
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  if (!entries.length) return [[prefix, Array.isArray(value) ? '[]' : '{}']];
  if (Array.isArray(value) && value.every((v) => v === null || typeof v !== 'object')) return [[prefix, JSON.stringify(value)]];
  return entries.flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k));
}

function lastIteration(s: StepReport): number | null {
  return s.result?.iteration ?? s.series?.loss.at(-1)?.x ?? null;
}

function stageRows(d: RunData): string {
  return d.steps
    .map((s) => {
      const att = s.series?.attempts ?? [];
      const failed = att.filter((a) => a.failure);
      const lost = failed.filter((a) => a.end).reduce((t, a) => t + (Date.parse(a.end!) - Date.parse(a.start)) / 1000, 0);
      const loss = s.result?.loss ?? s.series?.loss.at(-1)?.y ?? null;
      const score = d.evals.find((e) => e.step === s.id)?.score;
      const sk = s.series?.skippedIterations ?? 0;
      const skipped = sk ? `<span data-k="skipped" data-skipped="${sk}" data-nan="${s.series!.nanIterations}">${sk} iteration${sk === 1 ? '' : 's'} skipped${s.series!.nanIterations ? ` (${s.series!.nanIterations} NaN)` : ''}</span>` : '';
      return `<tr data-step="${esc(s.id)}"><td>${esc(s.id)}</td><td class="st-${esc(s.status)}">${esc(s.status)}</td><td data-k="attempts">${s.result?.attempts ?? att.length}</td><td data-k="failures">${failed.length ? esc(failed.map((a) => a.failure!.class).join(', ')) : ''}${failed.length && skipped ? '; ' : ''}${skipped}</td><td data-k="iteration">${lastIteration(s) ?? '–'}</td><td data-k="loss">${num(loss, 7)}</td><td data-k="score">${score ? esc(formatScore(score)) : ''}</td><td data-k="duration">${secs(s.result?.durationSec)}</td><td data-k="lost">${lost ? secs(lost) : ''}</td><td class="sum">${esc(s.summary)}</td></tr>`;
    })
    .join('\n');
}

function evalTable(d: RunData): string {
  if (!d.evals.length) return '<p class="none">No evaluation has finished.</p>';
  const benches = [...new Set(d.evals.map((e) => e.benchmark))];
  const models = [...new Set(d.evals.map((e) => e.model))];
  const head = `<tr><th>benchmark</th>${models.map((m) => `<th>${esc(m)}</th>`).join('')}</tr>`;
  const rows = benches.map((b) => {
    const cells = models.map((m) => {
      const e = d.evals.find((x) => x.benchmark === b && x.model === m);
      return e ? `<td data-bench="${esc(b)}" data-model="${esc(m)}" data-value="${e.score.value}">${esc(formatScore(e.score))}</td>` : '<td></td>';
    });
    return `<tr><th>${esc(b)}</th>${cells.join('')}</tr>`;
  });
  return `<table class="evals">${head}${rows.join('')}</table><p class="note">Columns: the final models (<code>fp8</code>: the FP8 export, <code>rl</code>: the RL model), then checkpoints evaluated while their stage trained (<code>step@iteration</code>).</p>`;
}

function failuresList(d: RunData): string {
  const rows = d.steps.flatMap((s) =>
    (s.series?.attempts ?? []).flatMap((a) => {
      const next = s.series!.attempts.find((b) => b.attempt === a.attempt + 1);
      if (!a.failure) return [];
      const after = next ? (next.resumedFrom !== null ? `attempt ${next.attempt} resumed from iteration ${next.resumedFrom}` : `attempt ${next.attempt} started fresh`) : 'no further attempt';
      return [`<tr><td>${esc(s.id)}</td><td>${a.attempt}</td><td>${esc(a.start)}</td><td class="cls">${esc(a.failure.class)}</td><td>${esc(a.failure.reason)}</td><td>${esc(after)}</td></tr>`];
    }),
  );
  if (!rows.length) return '<p class="none">No attempt failed.</p>';
  return `<table class="failures"><tr><th>step</th><th>attempt</th><th>started</th><th>class</th><th>reason</th><th>then</th></tr>${rows.join('')}</table>`;
}

function paritySection(d: RunData): string {
  const v = parityVerdict(d, d.parity!);
  const rows = v.figures.map((f) => `<tr data-variant="${esc(f.variant)}"><td>${esc(f.variant)}</td><td>${esc(f.precision)}</td><td>${f.seed}</td><td data-k="value">${f.value === null ? '–' : f.value.toFixed(6)}</td></tr>`).join('');
  const figs = v.gap === null || v.noise === null ? '' : `<p>FP8 against BF16: <b data-k="gap">${(v.gap * 100).toFixed(2)} %</b>; BF16 seed-to-seed noise: <b data-k="noise">${(v.noise * 100).toFixed(2)} %</b> (${esc(v.metric)}, the first ${d.parity!.iterations} iterations of CPT).</p>`;
  return `<h2>FP8 against BF16</h2>
<p class="verdict" data-verdict="${esc(v.verdict)}">Verdict: <b>${esc(v.verdict)}</b></p>
${figs}<table class="parity"><tr><th>variant</th><th>precision</th><th>seed</th><th>${esc(v.metric)}</th></tr>${rows}</table>
`;
}

function chartFigure(c: RenderedChart): string {
  const list = c.spec.series.map((s) => `${esc(s.name)} (${s.points}${s.drawn < s.points ? `, ${s.drawn} drawn` : ''})`).join(', ');
  return `<figure class="chart" id="chart-${esc(c.spec.id)}" data-x="${esc(c.spec.xName)}" data-y="${esc(c.spec.yName)}" data-series="${esc(JSON.stringify(c.spec.series))}">
${c.svg}
<figcaption>${esc(c.spec.caption)}. Series: ${list}.${c.png ? ` <a href="${esc(c.png)}">PNG</a>` : ''}</figcaption>
</figure>`;
}

const CSS = `body{font-family:"DejaVu Sans",system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;font-size:14px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555}.meta code{background:#f4f4f4;padding:1px 4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.sum{color:#555;font-size:12px}.problems{background:#fff4e5;border:1px solid #f0c36d;padding:8px 16px}
.st-completed,.st-kept{color:#007a55}.st-failed,.cls{color:#b33c00;font-weight:bold}.st-running{color:#0066aa}
figure.chart{margin:16px 0}figure.chart svg{max-width:100%;height:auto}figcaption{color:#555;font-size:12px}
.params td:first-child{font-family:monospace}.none,.note{color:#666}.charts{display:grid;grid-template-columns:1fr;gap:8px}`;

/** What the preflight warned of as each finished step started (activities/preflight-phase.ts); its failures are attempts' failures. */
function preflightWarnings(d: RunData): string {
  const w = d.steps.flatMap((s) => (s.result?.preflight ?? []).map((line) => `${s.id}: ${line}`));
  return w.length ? `<div class="problems preflight"><b>Preflight warnings:</b><ul>${w.map((x) => `<li>${esc(x)}</li>`).join('')}</ul></div>\n` : '';
}

export function reportHtml(d: RunData, charts: RenderedChart[], generatedAt: string): string {
  const p = d.plan;
  // A webhook URL written in the recipe shows its host only: the page is shared, the URL's path holds the token.
  const params = d.recipe ? flatten(d.recipe).map(([k, v]): [string, string] => [k, WEBHOOK_URL_PATH.test(k) ? JSON.stringify(shownRecipeValue(k, JSON.parse(v))) : v]) : [];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>infir2 report: ${esc(p.runId)}</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>${CSS}</style></head>
<body data-run="${esc(p.runId)}" data-status="${esc(d.status)}">
<h1>infir2 report: ${esc(p.runId)}</h1>
<p class="meta">recipe <code>${esc(p.recipe)}</code> · model <code>${esc(p.model)}</code> · precision <code>${esc(p.precision)}</code> · status <b class="st-${esc(d.status)}">${esc(d.status)}</b> · run directory <code>${esc(d.runDir)}</code> · generated ${esc(generatedAt)}</p>
${d.problems.length ? `<div class="problems"><b>Missing or cut:</b><ul>${d.problems.map((x) => `<li>${esc(x)}</li>`).join('')}</ul></div>` : ''}
${preflightWarnings(d)}${d.parity ? paritySection(d) : ''}<h2>Stages</h2>
<table class="stages"><tr><th>step</th><th>status</th><th>attempts</th><th>failures</th><th>iteration</th><th>loss</th><th>score</th><th>duration</th><th>lost</th><th>what it runs</th></tr>
${stageRows(d)}
</table>
<h2>Charts</h2>
<div class="charts">
${charts.length ? charts.map(chartFigure).join('\n') : '<p class="none">No step has logged a series yet.</p>'}
</div>
<h2>Evaluations</h2>
${evalTable(d)}
<h2>Failures and resumes</h2>
${failuresList(d)}
<h2>Parameters</h2>
${params.length ? `<table class="params">${params.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join('')}</table>` : '<p class="none">recipe.json is missing.</p>'}
</body></html>
`;
}
