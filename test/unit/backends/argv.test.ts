import { describe, expect, it } from 'vitest';
import { iterDirName, num, opt, when } from '../../../src/backends/argv.js';

describe('argv helpers', () => {
  it('writes numbers as the scripts do', () => {
    expect([1e-4, 2e-5, 1e-6, 5e-6, 0.008, 0.95, 1000000, 0, 1.1].map(num)).toEqual(['1e-4', '2e-5', '1e-6', '5e-6', '0.008', '0.95', '1000000', '0', '1.1']);
  });
  it('drops absent options and false switches', () => {
    expect([...opt('--a', 1), ...opt('--b', undefined), ...opt('--c', null), ...when(true, '--d'), ...when(false, '--e')]).toEqual(['--a', '1', '--d']);
  });
  it("names iteration directories as Megatron does", () => {
    expect(iterDirName(35000)).toBe('iter_0035000');
  });
});
