import { configDefaults, defineConfig } from 'vitest/config';
import { SlowFirst } from './test/slow-first.js';

// The Temporal worker is a native addon: keep vitest on child processes ('forks'), never worker threads
// (sdk-typescript#876). Every integration and e2e file starts its own dev server on free ports, its own workers
// and its own directories, so files run side by side: three at a time on 2 cores (INFIR2_TEST_WORKERS), since
// most of an integration file's time is waiting (trainers' iterations, heartbeat timeouts, restarts), not CPU.
// The long files start first (test/slow-first.ts). test/cluster is a tier of its own (vitest.cluster.config.ts,
// `make test-cluster`): it needs `make setup-cluster` first.
export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: Number(process.env.INFIR2_TEST_WORKERS ?? 3),
    sequence: { sequencer: SlowFirst },
    testTimeout: 120_000,
    hookTimeout: 180_000,
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, 'test/cluster/**'],
    reporters: ['default'],
  },
});
