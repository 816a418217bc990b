/**
 * Charts drawn without a browser: Apache ECharts' server-side renderer writes each chart as an SVG string
 * (inlined in the page, so it needs no network or script to view), and resvg (a Rust SVG renderer, prebuilt
 * for Node) turns that SVG into a PNG for a terminal or a chat message. Why these two: docs/report.md.
 */
import { Resvg, type ResvgRenderOptions } from '@resvg/resvg-js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as echarts from 'echarts';
import type { ChartSpec } from './line-chart.js';

export const CHART_WIDTH = 900;
export const CHART_HEIGHT = 360;

export function chartSvg(c: ChartSpec): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: CHART_WIDTH, height: c.height ?? CHART_HEIGHT });
  try {
    chart.setOption(c.option);
    return chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
}

/** Where distributions put DejaVu Sans (Debian/Ubuntu, Fedora, Arch). */
const DEJAVU_DIRS = ['/usr/share/fonts/truetype/dejavu', '/usr/share/fonts/dejavu-sans-fonts', '/usr/share/fonts/TTF'];
const DEJAVU_FILES = ['DejaVuSans.ttf', 'DejaVuSans-Bold.ttf'];

let fonts: ResvgRenderOptions['font'] | undefined;
/**
 * DejaVu Sans's own files where the system has them: resvg otherwise scans every system font for each chart, a
 * sixth of a chart's time (the end of every run waits for its report). Else any system font.
 */
function chartFonts(): ResvgRenderOptions['font'] {
  if (fonts) return fonts;
  const dir = DEJAVU_DIRS.find((d) => existsSync(join(d, DEJAVU_FILES[0]!)));
  const family = { defaultFontFamily: 'DejaVu Sans', sansSerifFamily: 'DejaVu Sans' };
  fonts = dir
    ? { loadSystemFonts: false, fontFiles: DEJAVU_FILES.map((f) => join(dir, f)).filter((f) => existsSync(f)), ...family }
    : { loadSystemFonts: true, ...family };
  return fonts;
}

/** A PNG twice the chart's size (sharp on a high-density screen); text in DejaVu Sans, else a system font. */
export function chartPng(svg: string): Buffer {
  const r = new Resvg(svg, { background: '#ffffff', fitTo: { mode: 'zoom', value: 2 }, font: chartFonts() });
  return r.render().asPng();
}
