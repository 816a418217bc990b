/** The Plan's webhooks part (types.ts holds the rest), and how a webhook URL may be shown. */

/**
 * What a webhook can be told: the run's end (completed, failed, cancelled), a step retried (with its failure
 * class), a hang detected, and a step's retry budget nearly spent (one more failure of that class without a new
 * checkpoint fails the step).
 */
export const NOTIFY_EVENTS = ['run.completed', 'run.failed', 'run.cancelled', 'step.retried', 'step.hang', 'step.budget'] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** `env:NAME`: a value named by reference, read from the worker's environment variable NAME. */
export const ENV_REF_RE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

export interface WebhookSpec {
  /**
   * `env:NAME`: the URL is the value of the worker's environment variable NAME, read when the event is sent (a
   * webhook URL usually holds its token, so only the name travels in the plan and history); or the URL itself.
   */
  url: string;
  /** `slack`: Slack's incoming-webhook JSON (`{"text": …}`); `json`: the event's fields. */
  format: 'slack' | 'json';
  events: NotifyEvent[];
}

export interface NotifySpec {
  webhooks: WebhookSpec[];
}

/**
 * Query parameters that carry a credential by their name (`?token=`, `?sig=`, `?api_key=`…): a URL written in the
 * recipe with one is refused, since the recipe travels into plan.json, recipe.json, the report and the history.
 */
export const SECRET_QUERY_PARAM = /^(.*[-_])?(token|key|apikey|secret|sig|signature|pass|passwd|password|pwd|auth|authorization|code|credentials?|session|jwt|hmac)$/i;

/** A recipe's path to a webhook's URL (`notify.webhooks.0.url`), as diffs and the report's parameters name it. */
export const WEBHOOK_URL_PATH = /^notify\.webhooks\.\d+\.url$/;

/**
 * A webhook URL as it may be shown (a report, a diff, a message): `env:NAME` as it is; a URL written in the recipe
 * by its scheme and host only, since its path and query are where receivers put their tokens (Slack's
 * `/services/T…/B…/<secret>`), and never with a `user:pass@`.
 */
export function shownWebhookUrl(url: unknown): unknown {
  if (typeof url !== 'string' || ENV_REF_RE.test(url)) return url;
  const m = /^([a-z][a-z0-9+.-]*:\/\/)(?:[^/?#]*@)?([^/?#]*)(.*)$/i.exec(url);
  if (!m) return '(not shown: not a URL)';
  return `${m[1]}${m[2]}${m[3] ? '/…' : ''}`;
}

/** A recipe value at `path` as it may be shown: a webhook's URL by shownWebhookUrl, anything else as it is. */
export function shownRecipeValue(path: string, value: unknown): unknown {
  return WEBHOOK_URL_PATH.test(path) ? shownWebhookUrl(value) : value;
}

/** A recipe diff's change as it may be shown (compare's warnings, resume's note): webhook URLs by their host. */
export function shownChange<T extends { path: string; before: unknown; after: unknown }>(c: T): T {
  return { ...c, before: shownRecipeValue(c.path, c.before), after: shownRecipeValue(c.path, c.after) };
}
