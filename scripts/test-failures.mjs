#!/usr/bin/env node
// What failed, in a few lines, as the last thing `make test` prints: CI keeps only the tail of a run's output,
// and a failure printed minutes earlier, above another tier's whole log, is lost there (stop 37's CI said only
// "vitest FAILED"). Reads the JSON reports vitest writes (scripts/test.sh, scripts/test-cluster.sh) and pytest's
// log; prints each failed test with the first lines of its error, or why there is no report to read. What the JSON
// leaves out (a failed beforeAll/afterAll, an unhandled error) is taken from the tier's log, FILE with .log for
// .json, where there is one.
// Usage: node scripts/test-failures.mjs TIER=FILE ... (FILE: a vitest JSON report, or a pytest log for "pytest=").
import { existsSync, readFileSync } from 'node:fs';

const ERROR_LINES = 6;
const strip = (s) => s.replace(/\u001b\[[0-9;]*m/g, '');
const firstLines = (text) =>
  strip(text)
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
    .slice(0, ERROR_LINES)
    .map((l) => `      ${l}`)
    .join('\n');

/** The lines after `marker` in a vitest log (its summary of failed suites and unhandled errors), up to a blank run. */
function fromLog(file, marker) {
  const log = file.replace(/\.json$/, '.log');
  if (log === file || !existsSync(log)) return '';
  const lines = strip(readFileSync(log, 'utf8')).split('\n');
  const at = lines.findIndex((l) => l.includes(marker));
  return at < 0 ? '' : firstLines(lines.slice(at + 1).join('\n'));
}

function vitest(tier, file) {
  if (!existsSync(file)) return [`${tier}: no report (${file}): the run ended before vitest wrote it; see its log above`];
  let report;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return [`${tier}: its report ${file} is not JSON (${err.message})`];
  }
  const out = [];
  for (const suite of report.testResults ?? []) {
    const where = suite.name.replace(`${process.cwd()}/`, '');
    const failed = (suite.assertionResults ?? []).filter((t) => t.status === 'failed');
    for (const t of failed) {
      out.push(`${tier}: ${where} > ${t.fullName}\n${firstLines((t.failureMessages ?? []).join('\n'))}`);
    }
    // A file can fail with no failed test: its hooks (beforeAll/afterAll), an import, a timeout of the file.
    if (suite.status === 'failed' && failed.length === 0) {
      const why = firstLines(suite.message ?? '') || fromLog(file, `FAIL  ${where}`);
      out.push(`${tier}: ${where} (the file, not a test: a hook, an import)\n${why}`);
    }
  }
  // Errors no test owns (a timer that throws after its test, a worker that exited) fail the run too.
  const unhandled = fromLog(file, 'Unhandled Error');
  if (unhandled) out.push(`${tier}: an error outside any test\n${unhandled}`);
  else if (out.length === 0 && report.success === false) {
    out.push(`${tier}: no test failed, yet vitest failed (an error outside any test: see its log above)`);
  }
  return out;
}

function pytest(file) {
  if (!existsSync(file)) return [];
  // pytest -q's short summary: "FAILED path::test - message", "ERROR path::test - message".
  return strip(readFileSync(file, 'utf8'))
    .split('\n')
    .filter((l) => /^(FAILED|ERROR) /.test(l))
    .map((l) => `pytest: ${l}`);
}

const lines = [];
for (const arg of process.argv.slice(2)) {
  const eq = arg.indexOf('=');
  const [tier, file] = [arg.slice(0, eq), arg.slice(eq + 1)];
  lines.push(...(tier === 'pytest' ? pytest(file) : vitest(tier, file)));
}
if (lines.length > 0) {
  console.log(`[test] what failed (${lines.length}):`);
  for (const l of lines) console.log(`  ${l}`);
}
