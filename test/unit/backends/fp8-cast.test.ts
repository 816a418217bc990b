/**
 * src/backends/tools/fp8-cast.py around a fake bf16_cast_fp8.py that behaves as docs/infir2-recipe.md §4.2 describes: the
 * wrapper adds quantization_config.fmt, copies the tokenizer files the tool skips, recomputes the index's
 * total_size, and passes pow-2 off as the empty string argparse needs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const WRAPPER = fileURLToPath(new URL('../../../src/backends/tools/fp8-cast.py', import.meta.url));
const PYTHON = '/usr/bin/python3';
const tmp = mkdtempSync(join(tmpdir(), 'infir2-fp8cast-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Writes one shard (2 tensors, 10 bytes of data), an index with a stale total_size, and a config without fmt. */
const FAKE_TOOL = `
import argparse, json, os, struct, sys
p = argparse.ArgumentParser()
p.add_argument("--input-bf16-hf-path", required=True)
p.add_argument("--output-fp8-hf-path", required=True)
p.add_argument("--force-pow-2-scale", type=bool, default=True)
a = p.parse_args()
out = a.output_fp8_hf_path
os.makedirs(out, exist_ok=True)
json.dump({"argv": sys.argv[1:], "pow2": a.force_pow_2_scale}, open(os.path.join(out, "tool-args.json"), "w"))
header = json.dumps({"w": {"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [0, 6]},
                     "w_scale_inv": {"dtype": "F16", "shape": [1, 2], "data_offsets": [6, 10]}}).encode()
with open(os.path.join(out, "model-00001-of-00001.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + bytes(10))
json.dump({"metadata": {"total_size": 999}, "weight_map": {"w": "model-00001-of-00001.safetensors", "w_scale_inv": "model-00001-of-00001.safetensors"}},
          open(os.path.join(out, "model.safetensors.index.json"), "w"))
cfg = json.load(open(os.path.join(a.input_bf16_hf_path, "config.json")))
cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
for name in ["tokenizer_config.json"]:
    open(os.path.join(out, name), "w").write(open(os.path.join(a.input_bf16_hf_path, name)).read())
`;

function setup(name: string) {
  const dir = join(tmp, name);
  const input = join(dir, 'hf');
  mkdirSync(input, { recursive: true });
  writeFileSync(join(input, 'config.json'), JSON.stringify({ model_type: 'qwen2', vocab_size: 152064 }));
  writeFileSync(join(input, 'tokenizer_config.json'), '{}');
  writeFileSync(join(input, 'vocab.json'), '{"a": 0}');
  writeFileSync(join(input, 'merges.txt'), '#version: 0.2\n');
  writeFileSync(join(input, 'model-00001-of-00001.safetensors'), 'bf16 weights');
  writeFileSync(join(dir, 'bf16_cast_fp8.py'), FAKE_TOOL);
  return { input, output: join(dir, 'fp8'), tool: join(dir, 'bf16_cast_fp8.py') };
}

const run = (args: string[]) => spawnSync(PYTHON, [WRAPPER, ...args], { encoding: 'utf8' });

describe('fp8-cast.py', () => {
  it('adds fmt, copies the skipped tokenizer files and recomputes total_size', () => {
    const { input, output, tool } = setup('pow2');
    const r = run(['--tool', tool, '--input-bf16-hf-path', input, '--output-fp8-hf-path', output, '--force-pow-2-scale', 'true', '--fmt', 'e4m3']);
    expect(r.status, r.stderr).toBe(0);
    const config = JSON.parse(readFileSync(join(output, 'config.json'), 'utf8'));
    expect(config.quantization_config).toEqual({ quant_method: 'fp8', activation_scheme: 'dynamic', weight_block_size: [128, 128], fmt: 'e4m3' });
    expect(readFileSync(join(output, 'vocab.json'), 'utf8')).toBe('{"a": 0}');
    expect(existsSync(join(output, 'merges.txt'))).toBe(true);
    expect(JSON.parse(readFileSync(join(output, 'model.safetensors.index.json'), 'utf8')).metadata.total_size).toBe(10);
    // pow-2 on: the tool's own default, no flag passed.
    expect(JSON.parse(readFileSync(join(output, 'tool-args.json'), 'utf8'))).toMatchObject({ pow2: true });
  });

  it('turns pow-2 scales off with the empty string (argparse type=bool)', () => {
    const { input, output, tool } = setup('nopow2');
    const r = run(['--tool', tool, '--input-bf16-hf-path', input, '--output-fp8-hf-path', output, '--force-pow-2-scale', 'false']);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(output, 'tool-args.json'), 'utf8'))).toEqual({ argv: ['--input-bf16-hf-path', input, '--output-fp8-hf-path', output, '--force-pow-2-scale', ''], pow2: false });
    // Without --fmt the tool's config stays as it wrote it.
    expect(JSON.parse(readFileSync(join(output, 'config.json'), 'utf8')).quantization_config.fmt).toBeUndefined();
  });

  it('starts a retry from scratch and passes the tool\'s failure on', () => {
    const { input, output, tool } = setup('retry');
    mkdirSync(output, { recursive: true });
    writeFileSync(join(output, 'stale.safetensors'), 'half-written');
    expect(run(['--tool', tool, '--input-bf16-hf-path', input, '--output-fp8-hf-path', output]).status).toBe(0);
    expect(existsSync(join(output, 'stale.safetensors'))).toBe(false);
    writeFileSync(tool, 'import sys; sys.exit(7)');
    const r = run(['--tool', tool, '--input-bf16-hf-path', input, '--output-fp8-hf-path', output]);
    expect(r.status).toBe(7);
    expect(r.stderr).toMatch(/exited with 7/);
  });

  it('is valid Python for the interpreter it runs on', () => {
    expect(() => execFileSync(PYTHON, ['-c', 'import ast, sys; ast.parse(open(sys.argv[1]).read())', WRAPPER])).not.toThrow();
  });
});
