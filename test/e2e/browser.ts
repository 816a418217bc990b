/** Debian's Chromium for the Web UI tests, driven through playwright-core (no browser download). */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ROOT } from '../integration/harness.js';

export const CHROMIUM = '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
export const SKIP_REASON = `${CHROMIUM} is not installed (\`make setup\` installs it)`;
/** Where the tests leave screenshots. */
export const OUT = join(ROOT, 'test-output');
export const UI_TIMEOUT = 20_000;
// Without the background-networking flags Chromium keeps calling home, which a closed network answers slowly.
const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** A browser with one page that reaches 127.0.0.1 only (the UI fetches a news feed from temporal.io). */
export async function openLocalPage(): Promise<{ browser: Browser; context: BrowserContext; page: Page }> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  await context.route(/^https?:\/\/(?!127\.0\.0\.1[:/])/, (r) => r.abort());
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT);
  mkdirSync(OUT, { recursive: true });
  return { browser, context, page };
}
