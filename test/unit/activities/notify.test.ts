/**
 * The notify activity against a real HTTP server on loopback: headers, bodies, and URLs kept out of messages; a
 * redirect is never followed (a 307 re-posted the event elsewhere), a URL with credentials is refused by name.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notify, webhookUrl, type NotifyInput } from '../../../src/activities/notify.js';

const got: { headers: IncomingMessage['headers']; body: unknown; path: string }[] = [];
let answer = 200;
const server = createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    got.push({ headers: req.headers, body: JSON.parse(body), path: req.url ?? '' });
    res.writeHead(answer).end();
  });
});
let base = '';

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const input = (url: string, format: 'slack' | 'json'): NotifyInput => ({
  id: 'tiny-r1/e-1/run.failed',
  event: 'run.failed',
  webhook: { url, format },
  at: 'notify.webhooks.0',
  text: '❌ infir2: tiny run r1 failed',
  fields: { recipe: 'tiny', runId: 'r1', status: 'failed' },
});

describe('the notify activity', () => {
  it('posts Slack JSON or the event\'s fields, with the event id and kind in headers', async () => {
    process.env.INFIR2_TEST_HOOK = `${base}/services/T000/B000/secret-token`;
    answer = 200;
    expect(await notify(input('env:INFIR2_TEST_HOOK', 'slack'))).toEqual({ status: 200 });
    expect(await notify(input(`${base}/plain`, 'json'))).toEqual({ status: 200 });
    expect(got[0]).toMatchObject({ path: '/services/T000/B000/secret-token', body: { text: '❌ infir2: tiny run r1 failed' } });
    expect(got[0]!.headers['x-infir2-event-id']).toBe('tiny-r1/e-1/run.failed');
    expect(got[0]!.headers['x-infir2-event']).toBe('run.failed');
    expect(got[1]!.body).toEqual({ id: 'tiny-r1/e-1/run.failed', event: 'run.failed', recipe: 'tiny', runId: 'r1', status: 'failed', text: '❌ infir2: tiny run r1 failed' });
  });

  it('fails retryably on an error answer or no answer, naming neither the URL nor its token', async () => {
    process.env.INFIR2_TEST_HOOK = `${base}/services/T000/B000/secret-token`;
    answer = 503;
    const err = await notify(input('env:INFIR2_TEST_HOOK', 'slack')).catch((e: Error & { type?: string; nonRetryable?: boolean }) => e);
    expect(err).toMatchObject({ message: 'notify.webhooks.0: the webhook answered 503', type: 'webhook', nonRetryable: false });
    // A port nothing listens on (taken and released).
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    process.env.INFIR2_TEST_HOOK = `http://127.0.0.1:${port}/services/secret-token`;
    const refused = await notify(input('env:INFIR2_TEST_HOOK', 'slack')).catch((e: Error) => e);
    expect((refused as Error).message).toBe('notify.webhooks.0: the webhook could not be reached (ECONNREFUSED)');
  });

  it('a variable the worker lacks, or one without an http(s) URL, is a configuration error naming the variable only', () => {
    expect(() => webhookUrl({ url: 'env:NO_SUCH_HOOK_VAR' }, 'notify.webhooks.1', {})).toThrow(/^notify\.webhooks\.1\.url: this worker's environment has no NO_SUCH_HOOK_VAR$/);
    let e: Error & { nonRetryable?: boolean; type?: string } = new Error();
    try {
      webhookUrl({ url: 'env:HOOK' }, 'notify.webhooks.0', { HOOK: 'ftp://files/secret-token' });
    } catch (err) {
      e = err as typeof e;
    }
    expect(e.message).toBe('notify.webhooks.0.url: HOOK does not hold an http(s) URL');
    expect(e).toMatchObject({ nonRetryable: true, type: 'config' });
  });
});

describe('redirects and credentials', () => {
  /** A receiver that answers every request with `status` and a Location to `to`, and one that records what reaches it. */
  const elsewhere: string[] = [];
  const target = createServer((req, res) => {
    elsewhere.push(`${req.method} ${req.url}`);
    res.writeHead(200).end();
  });
  let redirectStatus = 301;
  const redirector = createServer((req, res) => {
    req.resume();
    res.writeHead(redirectStatus, { location: `http://127.0.0.1:${(target.address() as AddressInfo).port}/stolen?token=secret-token` }).end();
  });
  beforeAll(async () => {
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    await new Promise<void>((r) => target.close(() => r()));
    await new Promise<void>((r) => redirector.close(() => r()));
  });

  it.each([301, 302, 303, 307, 308])('a %i is not followed: nothing reaches the new location, the delivery fails for good, naming neither URL', async (status) => {
    redirectStatus = status;
    process.env.INFIR2_TEST_HOOK = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hook/secret-token`;
    const err = await notify(input('env:INFIR2_TEST_HOOK', 'json')).catch((e: Error & { type?: string; nonRetryable?: boolean }) => e);
    expect(err).toMatchObject({
      message: `notify.webhooks.0: the webhook answered ${status}, a redirect, which is not followed: give the URL it redirects to`,
      type: 'config',
      nonRetryable: true,
    });
    expect(elsewhere).toEqual([]);
  });

  it('a URL with credentials (user:pass@) is a configuration error that says so, not "no answer"', () => {
    let e: Error & { nonRetryable?: boolean; type?: string } = new Error();
    try {
      webhookUrl({ url: 'env:HOOK' }, 'notify.webhooks.0', { HOOK: 'https://bot:hunter2@hooks.example.com/x' });
    } catch (err) {
      e = err as typeof e;
    }
    expect(e.message).toBe('notify.webhooks.0.url: HOOK holds a URL with credentials (user:pass@), which is never sent: give one without them');
    expect(e).toMatchObject({ nonRetryable: true, type: 'config' });
    expect(e.message).not.toContain('hunter2');
  });
});
