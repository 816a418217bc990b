/**
 * Charts drawn without a browser: Apache ECharts' server-side renderer writes each chart as an SVG string
 * (inlined in the page, so it needs no network or script to view), and resvg (a Rust SVG renderer, prebuilt
 * for Node) turns that SVG into a PNG for a terminal or a chat message. Why these two: docs/report.md.
 */
import { Resvg } from '@resvg/resvg-js';
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

/** A PNG twice the chart's size (sharp on a high-density screen); text in DejaVu Sans, else a system font. */
export function chartPng(svg: string): Buffer {
  const r = new Resvg(svg, {
    background: '#ffffff',
    fitTo: { mode: 'zoom', value: 2 },
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans', sansSerifFamily: 'DejaVu Sans' },
  });
  return r.render().asPng();
}
