import { configDefaults, defineConfig } from 'vitest/config';

// The Temporal worker is a native addon: keep vitest on child processes ('forks'),
// never worker threads (sdk-typescript#876). Integration files share one dev server
// per file and spawn trainers, so on 2 cores they run one file at a time.
// test/cluster is a tier of its own (vitest.cluster.config.ts, `make test-cluster`): it needs
// `make setup-cluster` first, so `make test` leaves it out.
export default defineConfig({
  test: {
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, 'test/cluster/**'],
    reporters: ['default'],
  },
});
