/**
 * `notify:`: webhooks told of a run's events (activities/notify.ts sends them). The URL is named by reference
 * (`env:NAME`, a variable of the worker that serves the orchestrator queue) since a webhook URL usually holds
 * its token, and everything in a recipe travels into the plan and the run's history.
 */
import { z } from 'zod';
import { ENV_REF_RE, NOTIFY_EVENTS, SECRET_QUERY_PARAM, shownWebhookUrl } from '../plan/notify-spec.js';

/** What is wrong with a webhook URL written in the recipe, or null. */
function urlProblem(u: string): string | null {
  if (ENV_REF_RE.test(u)) return null;
  let url: URL | null = null;
  try {
    url = /^https?:\/\/[^\s/]+\S*$/.test(u) ? new URL(u) : null;
  } catch {
    /* not a URL */
  }
  if (!url) return "expected env:NAME (the worker's environment variable that holds the URL) or an http(s) URL";
  const keep = 'a URL written in the recipe is stored in plan.json, recipe.json, the report and the run\'s history: put it in a worker environment variable and write env:NAME';
  if (url.username || url.password) return 'holds credentials (user:pass@), which fetch never sends and plan.json, recipe.json, the report and the run\'s history would show: give a URL without them, in a worker environment variable (env:NAME)';
  const secret = [...url.searchParams.keys()].find((k) => SECRET_QUERY_PARAM.test(k));
  if (secret) return `holds a secret in its query (${secret}=…): ${keep}`;
  return null;
}

export const webhook = z
  .strictObject({
    url: z
      .string()
      // The message shows the URL by its host only: the value refused is often the very secret it must not show.
      .superRefine((u, ctx) => {
        const problem = urlProblem(u);
        if (problem) ctx.addIssue({ code: 'custom', message: problem, input: shownWebhookUrl(u) });
      })
      .describe('`env:NAME`: the URL is read from the worker\'s environment variable NAME when an event is sent, and only the name enters the plan and history; or an `http(s)://` URL, which does (lint warns), refused with credentials (`user:pass@`) or a secret in its query (`?token=`, `?sig=`, `?key=`…)'),
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
