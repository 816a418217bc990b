/**
 * The chart every page draws with: a spec (an Apache ECharts option plus what a test reads without pixels: axis
 * names, series and their point counts) and the line chart the report, `compare` and `parity` all build on.
 * Pure: render.ts draws specs to SVG and PNG.
 */
import type { EChartsOption, SeriesOption } from 'echarts';
import { visible } from '../util/visible.js';
import { downsample } from './downsample.js';
import type { Curve } from './curve.js';

export interface ChartSpec {
  id: string;
  title: string;
  /** One line under the chart: what it shows and where from. */
  caption: string;
  xName: string;
  yName: string;
  /** Series drawn, with their point counts before downsampling (for the page and its tests). */
  series: { name: string; points: number; drawn: number }[];
  option: EChartsOption;
  height?: number;
}

/** The Okabe–Ito palette: told apart by readers with colour-vision deficiency. */
export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#F0E442', '#000000'];

export interface Line {
  name: string;
  points: Curve;
  dashed?: boolean;
  symbol?: boolean;
}

interface LineChartInput {
  id: string;
  title: string;
  caption: string;
  xName: string;
  yName: string;
  lines: Line[];
  marks?: { x: number; label: string }[];
  spans?: { from: number; to: number; label: string }[];
  logY?: boolean;
}

/** A line chart of named series (downsampled), with optional phase marks and shaded spans. */
export function lineChart(input: LineChartInput): ChartSpec | null {
  // Names come from plans and recipes in run directories (others' files): drawn with control characters escaped.
  const c = { ...input, title: visible(input.title), caption: visible(input.caption), marks: input.marks?.map((m) => ({ ...m, label: visible(m.label) })), spans: input.spans?.map((s) => ({ ...s, label: visible(s.label) })) };
  const lines = c.lines.filter((l) => l.points.length > 0).map((l) => ({ ...l, name: visible(l.name) }));
  if (!lines.length) return null;
  const drawn = lines.map((l) => downsample(l.points));
  const series: SeriesOption[] = lines.map((l, i) => ({
    type: 'line',
    name: l.name,
    data: drawn[i]!.map((p) => [p.x, p.y]),
    showSymbol: l.symbol ?? drawn[i]!.length <= 40,
    symbolSize: 5,
    lineStyle: { width: 1.5, type: l.dashed ? 'dashed' : 'solid' },
    sampling: undefined,
    ...(i === 0 && (c.marks?.length || c.spans?.length)
      ? {
          markLine: c.marks?.length
            ? { symbol: 'none', silent: true, lineStyle: { color: '#666', type: 'dotted' }, label: { formatter: '{b}', position: 'insideEndTop', fontSize: 10 }, data: c.marks.map((m) => ({ name: m.label, xAxis: m.x })) }
            : undefined,
          markArea: c.spans?.length
            ? { silent: true, itemStyle: { color: 'rgba(0,0,0,0.04)', borderColor: '#bbb', borderWidth: 0.5 }, label: { fontSize: 10, color: '#555' }, data: c.spans.map((s) => [{ name: s.label, xAxis: s.from }, { xAxis: s.to }]) }
            : undefined,
        }
      : {}),
  }));
  return {
    id: c.id,
    title: c.title,
    caption: c.caption,
    xName: c.xName,
    yName: c.yName,
    series: lines.map((l, i) => ({ name: l.name, points: l.points.length, drawn: drawn[i]!.length })),
    option: {
      animation: false,
      color: PALETTE,
      title: { text: c.title, left: 'center', textStyle: { fontSize: 14 } },
      legend: { top: 34, type: 'plain' },
      grid: { left: 70, right: 90, top: 74, bottom: 48 },
      tooltip: { trigger: 'axis' },
      xAxis: { type: 'value', name: c.xName, nameLocation: 'middle', nameGap: 28, scale: true },
      yAxis: { type: c.logY ? 'log' : 'value', name: c.yName, nameLocation: 'middle', nameGap: 52, scale: true },
      series,
    },
  };
}
