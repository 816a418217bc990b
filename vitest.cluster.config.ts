import { defineConfig } from 'vitest/config';

// The cluster tier (`make test-cluster`): Temporal server on PostgreSQL, as docker-compose.yml runs it, built by
// `make setup-cluster` (test/cluster/harness.ts). One file at a time: each file starts its own PostgreSQL and
// server, and the recovery times it measures should not compete for the 2 cores with another file's.
export default defineConfig({
  test: {
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 300_000,
    include: ['test/cluster/**/*.test.ts'],
    reporters: ['default'],
  },
});
