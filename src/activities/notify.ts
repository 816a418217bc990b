/**
 * The `notify` activity: one event to one webhook. It runs on the orchestrator queue's workers, which hold the
 * webhook URLs in their environment (`env:NAME` in the recipe): the URL is read here, at send time, and appears
 * in no message, history event or log line. A receiver that fails is retried by Temporal (the workflow's retry
 * policy); each request carries the event's stable id, so a receiver drops the repeats a retry may make. A
 * redirect is not followed (the event goes where the recipe says, or nowhere), and is not retried.
 */
import { ApplicationFailure } from '@temporalio/common';
import { ENV_REF_RE, type NotifyEvent, type WebhookSpec } from '../plan/notify-spec.js';

export interface NotifyInput {
  /** Stable per event (deterministic in the workflow): the same on every retry of its delivery. */
  id: string;
  event: NotifyEvent;
  webhook: Pick<WebhookSpec, 'url' | 'format'>;
  /** Where the webhook is in the recipe (`notify.webhooks.0`), for messages. */
  at: string;
  /** One line for people (Slack's `text`). */
  text: string;
  /** The event's facts (run, step, attempt, failure class, …) for the `json` format. */
  fields: Record<string, string | number | null>;
}

/** How long one delivery may take. */
const SEND_TIMEOUT_MS = 10_000;

/** The URL a webhook names: the worker's variable for `env:NAME`, else the URL itself. Never echoed. */
export function webhookUrl(webhook: Pick<WebhookSpec, 'url'>, at: string, env: NodeJS.ProcessEnv = process.env): string {
  const ref = ENV_REF_RE.exec(webhook.url);
  const url = ref ? env[ref[1]!] : webhook.url;
  if (ref && !url) throw ApplicationFailure.nonRetryable(`${at}.url: this worker's environment has no ${ref[1]}`, 'config');
  const what = ref ? `${ref[1]} holds` : 'is';
  let parsed: URL | null = null;
  try {
    parsed = /^https?:\/\/[^\s/]+/.test(url!) ? new URL(url!) : null;
  } catch {
    /* not a URL */
  }
  if (!parsed) throw ApplicationFailure.nonRetryable(`${at}.url: ${ref ? `${ref[1]} does not hold` : 'is not'} an http(s) URL`, 'config');
  // fetch refuses to send a URL with credentials; it said only "no answer" (issue 30).
  if (parsed.username || parsed.password) throw ApplicationFailure.nonRetryable(`${at}.url: ${what} a URL with credentials (user:pass@), which is never sent: give one without them`, 'config');
  return url!;
}

/** The request body: Slack's incoming-webhook JSON, or the event's fields. */
export function webhookBody(i: Pick<NotifyInput, 'id' | 'event' | 'text' | 'fields' | 'webhook'>): string {
  return JSON.stringify(i.webhook.format === 'slack' ? { text: i.text } : { id: i.id, event: i.event, ...i.fields, text: i.text });
}

export async function notify(i: NotifyInput): Promise<{ status: number }> {
  const url = webhookUrl(i.webhook, i.at);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-infir2-event-id': i.id, 'x-infir2-event': i.event },
      body: webhookBody(i),
      signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
      // Never followed: a 301/302 was followed as a GET, a 307/308 re-posted the event (and its headers) wherever
      // the receiver pointed, another host included.
      redirect: 'manual',
    });
  } catch (err) {
    // The cause's code only (ECONNREFUSED, a timeout): its message would name the URL's host and port.
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? ((err as Error).name === 'TimeoutError' ? `no answer in ${SEND_TIMEOUT_MS / 1000} s` : 'no answer');
    throw ApplicationFailure.retryable(`${i.at}: the webhook could not be reached (${cause})`, 'webhook');
  }
  await res.body?.cancel();
  // The new location is not named: it may carry a token as the URL did.
  if (res.status >= 300 && res.status < 400) {
    throw ApplicationFailure.nonRetryable(`${i.at}: the webhook answered ${res.status}, a redirect, which is not followed: give the URL it redirects to`, 'config');
  }
  if (!res.ok) throw ApplicationFailure.retryable(`${i.at}: the webhook answered ${res.status}`, 'webhook');
  return { status: res.status };
}
