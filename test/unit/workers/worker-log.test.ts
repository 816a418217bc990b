/**
 * A worker's log of the SDK: sdk-core's retry warnings during a server outage (forwarded to this logger, not
 * printed by core in colour) become one plain line each, with the gist of the gRPC status; repeats of one kind
 * within a minute are counted into the next line of that kind; INFO and the pool worker's expected
 * "no workflows" warning are dropped.
 */
import { describe, expect, it } from 'vitest';
import { gist, oneLine, REPEAT_WINDOW_MS, workerLogger } from '../../../src/workers/worker-log.js';
import { stoppedLine } from '../../../src/cli/worker.js';

// As sdk-core printed it to stderr during an outage, before the logs were forwarded (seen on a hand-started worker).
const CORE_ERROR =
  'Status { code: Unavailable, message: "tcp connect error", source: Some(tonic::transport::Error(Transport, ConnectError(ConnectError("tcp connect error", 127.0.0.1:17481, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })))) }';

describe('worker log lines', () => {
  it("reduces a gRPC status to its code, message and cause", () => {
    expect(gist(CORE_ERROR)).toBe('Unavailable: tcp connect error (Connection refused)');
    expect(gist('plain failure\nwith a second line')).toBe('plain failure');
  });

  it('drops colours and newlines', () => {
    expect(oneLine('\x1b[2mgRPC call\x1b[0m poll_activity_task_queue\n  retried 6 times', { error: CORE_ERROR })).toBe(
      'gRPC call poll_activity_task_queue retried 6 times (Unavailable: tcp connect error (Connection refused))',
    );
  });

  it('prints a kind of warning once a minute, then says how many it did not print', () => {
    const lines: string[] = [];
    let t = Date.parse('2026-11-25T13:31:00Z');
    const log = workerLogger((l) => lines.push(l), () => t);
    for (let n = 5; n < 15; n++) {
      log.log('WARN', `gRPC call get_cluster_info retried ${n} times`, { error: CORE_ERROR });
      t += 2_000;
    }
    log.log('WARN', 'gRPC call poll_activity_task_queue retried 6 times', { error: CORE_ERROR });
    t += REPEAT_WINDOW_MS;
    log.log('WARN', 'gRPC call get_cluster_info retried 44 times', { error: CORE_ERROR });
    log.log('INFO', 'Worker state changed');
    log.warn('No workflows registered, not polling for workflow tasks');
    log.error('Activity failed', { error: 'boom' });
    expect(lines).toEqual([
      '2026-11-25T13:31:00.000Z warn: gRPC call get_cluster_info retried 5 times (Unavailable: tcp connect error (Connection refused))',
      '2026-11-25T13:31:20.000Z warn: gRPC call poll_activity_task_queue retried 6 times (Unavailable: tcp connect error (Connection refused))',
      '2026-11-25T13:32:20.000Z warn: gRPC call get_cluster_info retried 44 times (Unavailable: tcp connect error (Connection refused)) [9 more like it in the last 80 s]',
      '2026-11-25T13:32:20.000Z error: Activity failed (boom)',
    ]);
  });

  it("ends a worker's log with why it stopped and how long it ran", () => {
    expect(stoppedLine('SIGTERM received', 3_725_000)).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z worker stopped \(pid \d+, ran 62 min\): SIGTERM received; it polls no more; a step it was running was stopped/,
    );
  });
});
