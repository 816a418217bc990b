/** How `plan`, `status` and the supervisor's notes say a step's stall limits (activities/stall-policy.ts). */
import type { StallSpec } from './types.js';

/** The words `plan` and `status` show for a limit: `90s`, `3m20s`, `5m`, `1h30m`. */
export function shortDuration(sec: number): string {
  const s = Math.round(sec);
  if (s < 120) return `${s}s`;
  if (s < 600 && s % 60) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s % 3600 === 0) return `${s / 3600}h`;
  const m = Math.round(s / 60);
  if (m < 120) return `${m}m`;
  return `${Math.floor(m / 60)}h${m % 60 ? `${m % 60}m` : ''}`;
}

/** One line for `plan`: the step's limits, phase by phase. */
export function describeStallSpec(spec: StallSpec): string {
  if (spec.factor === 1 && spec.startupSec === spec.capSec && spec.floorSec === spec.capSec) return `${shortDuration(spec.capSec)} fixed`;
  const d = shortDuration;
  return `startup ${d(Math.min(spec.startupSec, spec.capSec))}, then max(${d(spec.floorSec)}, ${spec.factor}×${spec.basis} gap)${spec.saveEvery ? `; save ${d(Math.min(spec.saveSec, spec.capSec))}${spec.saveFactor ? ` (then ${spec.saveFactor}×longest save)` : ''}` : ''}${spec.evalEvery ? `, eval ${d(Math.min(spec.evalSec, spec.capSec))}` : ''}; at most ${d(spec.capSec)}`;
}
