/**
 * `notify:`: webhooks told of a run's events (activities/notify.ts sends them). The URL is named by reference
 * (`env:NAME`, a variable of the worker that serves the orchestrator queue) since a webhook URL usually holds
 * its token, and everything in a recipe travels into the plan and the run's history.
 */
import { z } from 'zod';
import { ENV_REF_RE, NOTIFY_EVENTS } from '../plan/types.js';

export const webhook = z
  .strictObject({
    url: z
      .string()
      .refine((u) => ENV_REF_RE.test(u) || /^https?:\/\/[^\s/]+\S*$/.test(u), {
        error: 'expected env:NAME (the worker\'s environment variable that holds the URL) or an http(s) URL',
      })
      .describe('`env:NAME`: the URL is read from the worker\'s environment variable NAME when an event is sent, and only the name enters the plan and history; or an `http(s)://` URL, which does (lint warns)'),
    format: z.enum(['slack', 'json']).default('slack').describe('`slack`: Slack\'s incoming-webhook JSON (`{"text": …}`); `json`: the event\'s fields (`id`, `event`, `recipe`, `runId`, `step`, `class`, …)'),
    events: z
      .array(z.enum(NOTIFY_EVENTS))
      .min(1)
      .default([...NOTIFY_EVENTS])
      .describe('which events it gets; default: all'),
  })
  .describe('one webhook');

export const notify = z
  .strictObject({
    webhooks: z.array(webhook).min(1).describe('where events go; each request carries the event\'s stable id (`X-Infir2-Event-Id`), so that a receiver can drop the duplicates a retried delivery may make'),
  })
  .describe('webhooks told of the run\'s events, sent by the workers of the orchestrator queue');
