/**
 * deploy/k8s/ checked offline against the Kubernetes API schemas (no cluster can run here, and no network is
 * used): every object is compiled as its type from `kubernetes-types` (generated from Kubernetes 1.30's OpenAPI:
 * an unknown field, a wrong type or a missing required field is a compile error) and validated by the object's
 * model from `kubernetes-models` (the same OpenAPI's JSON schemas: formats and enums). Both packages are locked
 * dev dependencies that `make setup` installs. Then what the manifests must agree with: the releases
 * docker-compose.yml pins, the search attributes of the code, the scripts in deploy/temporal/, and what a GPU
 * worker needs (the host's pid namespace for its shared host directory, the GPUs it names, secrets by reference).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { SEARCH_ATTRIBUTE_FLAGS } from '../../../src/temporal/constants.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DIR = join(ROOT, 'deploy', 'k8s');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  [k: string]: unknown;
}

/** Where each kind's type (kubernetes-types) and model (kubernetes-models) live. */
const KINDS: Record<string, { types: string; model: string }> = {
  'v1/Namespace': { types: 'kubernetes-types/core/v1', model: 'kubernetes-models/v1/Namespace' },
  'v1/Service': { types: 'kubernetes-types/core/v1', model: 'kubernetes-models/v1/Service' },
  'v1/PersistentVolumeClaim': { types: 'kubernetes-types/core/v1', model: 'kubernetes-models/v1/PersistentVolumeClaim' },
  'apps/v1/Deployment': { types: 'kubernetes-types/apps/v1', model: 'kubernetes-models/apps/v1/Deployment' },
  'apps/v1/StatefulSet': { types: 'kubernetes-types/apps/v1', model: 'kubernetes-models/apps/v1/StatefulSet' },
  'apps/v1/DaemonSet': { types: 'kubernetes-types/apps/v1', model: 'kubernetes-models/apps/v1/DaemonSet' },
  'batch/v1/Job': { types: 'kubernetes-types/batch/v1', model: 'kubernetes-models/batch/v1/Job' },
};
const kindOf = (o: K8sObject) => `${o.apiVersion}/${o.kind}`;

const kustomization = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as { resources: string[]; images: { name: string }[] };
const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const objects: { file: string; o: K8sObject }[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => {
    expect(d.errors, file).toEqual([]);
    return { file, o: d.toJS() as K8sObject };
  }),
);
const find = (kind: string, name: string) => {
  const hit = objects.find(({ o }) => o.kind === kind && o.metadata.name === name);
  if (!hit) throw new Error(`deploy/k8s has no ${kind} ${name}`);
  return hit.o;
};

/** The type errors of `objs`, each compiled as its kubernetes-types type (one program for all: one compile). */
function typeErrors(objs: K8sObject[]): string[] {
  const file = join(DIR, '__manifests_check__.ts');
  const lines = objs.map((o, i) => {
    const k = KINDS[kindOf(o)];
    if (!k) return `// no type for ${kindOf(o)}`;
    return `import type { ${o.kind} as T${i} } from '${k.types}';\nexport const o${i}: T${i} = ${JSON.stringify(o)};`;
  });
  const source = lines.join('\n');
  const host = ts.createCompilerHost({});
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.readFile = (f) => (f === file ? source : readFile(f));
  host.fileExists = (f) => f === file || fileExists(f);
  const program = ts.createProgram([file], { strict: true, noEmit: true, skipLibCheck: true, types: [], module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }, host);
  return ts.getPreEmitDiagnostics(program, program.getSourceFile(file)).map((d) => {
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1;
    const o = objs[Math.floor(at / 2)];
    return `${o ? `${o.kind} ${o.metadata.name}` : '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

/** The schema errors of `o` from its kubernetes-models model (formats, enums, required fields). */
async function schemaErrors(o: K8sObject): Promise<string[]> {
  const k = KINDS[kindOf(o)];
  if (!k) return [`${kindOf(o)}: a kind this test does not know`];
  const mod = (await import(k.model)) as Record<string, new (data: unknown) => { validate(): void }>;
  try {
    new mod[o.kind]!(o).validate();
    return [];
  } catch (err) {
    return [`${o.kind} ${o.metadata.name}: ${(err as Error).message}`];
  }
}

interface Container {
  image: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  resources?: { limits?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  containers: Container[];
  volumes?: { name: string; hostPath?: { path: string }; configMap?: { name: string } }[];
  hostPID?: boolean;
  hostNetwork?: boolean;
  hostIPC?: boolean;
  terminationGracePeriodSeconds?: number;
}
const podOf = (o: K8sObject) => (o.spec as { template: { spec: PodSpec } }).template.spec;
const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name);

describe('deploy/k8s against the Kubernetes API schemas', () => {
  it('lists every manifest in kustomization.yaml', () => {
    expect([...kustomization.resources].sort()).toEqual([...files].sort());
    expect(objects.length).toBeGreaterThanOrEqual(12);
  });

  it('compiles every object as its Kubernetes type: no unknown field, no wrong type, nothing required missing', () => {
    expect(typeErrors(objects.map((x) => x.o))).toEqual([]);
  }, 60_000);

  it("validates every object with its model's JSON schema", async () => {
    const errors = (await Promise.all(objects.map(({ o }) => schemaErrors(o)))).flat();
    expect(errors).toEqual([]);
  });

  it('catches a field the API does not have, a wrong type and a bad enum value (the checks can fail)', async () => {
    const ds = structuredClone(find('DaemonSet', 'infir2-gpu-worker'));
    const spec = podOf(ds) as unknown as Record<string, unknown>;
    (spec.containers as Record<string, unknown>[])[0]!.gpuCount = 8;
    spec.hostPID = 'yes';
    expect(typeErrors([ds]).join('\n')).toMatch(/gpuCount/);
    const svc = structuredClone(find('Service', 'temporal'));
    (svc.spec as Record<string, unknown>).type = 'Public';
    expect((await schemaErrors(svc)).join('\n')).toMatch(/must be equal to one of the allowed values/);
    const job = structuredClone(find('Job', 'temporal-setup'));
    (podOf(job) as unknown as Record<string, unknown>).restartPolicy = 'Sometimes';
    expect((await schemaErrors(job)).join('\n')).toMatch(/restartPolicy/);
  }, 60_000);
});

describe('deploy/k8s agrees with the rest of the deployment', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, { image?: string }> };
  const images = objects.flatMap(({ o }) => (o.spec && (o.spec as { template?: unknown }).template ? podOf(o).containers.map((c) => c.image) : []));

  it('runs the releases docker-compose.yml pins (server, admin tools, UI, PostgreSQL)', () => {
    for (const name of ['postgresql', 'temporal', 'temporal-schema', 'temporal-setup', 'ui']) expect(images, name).toContain(compose.services[name]!.image);
    expect(images.filter((i) => /^(temporalio|postgres)/.test(i)).every((i) => Object.values(compose.services).some((s) => s.image === i))).toBe(true);
  });

  it("registers the code's search attributes and runs deploy/temporal's scripts, whose files the set-up commands name", () => {
    const setup = podOf(find('Job', 'temporal-setup')).containers[0]!;
    expect(envOf(setup, 'INFIR2_SEARCH_ATTRIBUTES')?.value).toBe(SEARCH_ATTRIBUTE_FLAGS.join(' '));
    const head = readFileSync(join(DIR, 'kustomization.yaml'), 'utf8');
    const created = new Map([...head.matchAll(/create configmap (\S+) ((?:--from-file=\S+ ?)+)/g)].map((m) => [m[1]!, [...m[2]!.matchAll(/--from-file=(\S+)/g)].map((f) => f[1]!)]));
    for (const paths of created.values()) for (const p of paths) expect(existsSync(join(ROOT, p)), p).toBe(true);
    for (const { o } of objects.filter(({ o }) => (o.spec as { template?: unknown })?.template)) {
      const pod = podOf(o);
      for (const v of pod.volumes ?? []) {
        if (!v.configMap) continue;
        const paths = created.get(v.configMap.name);
        expect(paths, `${o.metadata.name} mounts configmap ${v.configMap.name}`).toBeDefined();
        const mount = pod.containers[0]!.volumeMounts!.find((m) => m.name === v.name)!.mountPath;
        // Each script a container runs from the mount is one of the files the configmap is made from.
        for (const arg of pod.containers[0]!.command ?? []) {
          if (arg.startsWith(`${mount}/`)) expect(paths!.map((p) => p.split('/').pop())).toContain(arg.slice(mount.length + 1));
        }
      }
    }
  });

  it('points every worker and job at the temporal Service', () => {
    const port = (find('Service', 'temporal').spec as { ports: { port: number }[] }).ports[0]!.port;
    const addresses = objects.flatMap(({ o }) => ((o.spec as { template?: unknown })?.template ? podOf(o).containers.flatMap((c) => (envOf(c, 'TEMPORAL_ADDRESS')?.value ? [envOf(c, 'TEMPORAL_ADDRESS')!.value!] : [])) : []));
    expect(addresses.length).toBe(4);
    for (const a of addresses) expect(a).toMatch(new RegExp(`^temporal(\\.infir2\\.svc\\.cluster\\.local)?:${port}$`));
  });

  it('gives the GPU worker the host pid namespace, network and IPC, a host directory, its GPUs, and time to save', () => {
    const pod = podOf(find('DaemonSet', 'infir2-gpu-worker'));
    expect(pod).toMatchObject({ hostPID: true, hostNetwork: true, hostIPC: true });
    const c = pod.containers[0]!;
    const args = c.args ?? [];
    const flag = (f: string) => args[args.indexOf(f) + 1]!;
    expect(args).toContain('--no-workflows');
    expect(Number(c.resources?.limits?.['nvidia.com/gpu'])).toBe(flag('--gpus').split(',').length);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(Number(flag('--kill-grace')));
    const hostDir = envOf(c, 'INFIR2_HOST_DIR')!.value!;
    const mounted = c.volumeMounts!.find((m) => m.mountPath === hostDir)!;
    expect(pod.volumes!.find((v) => v.name === mounted.name)?.hostPath?.path).toBe(hostDir);
    // The pools it serves are the 7B recipe's, with their queues.
    const recipe = parse(read('recipes/qwen2.5-7b-fp8.yaml')) as { pools: Record<string, { taskQueue: string }> };
    const pools = args.flatMap((a, i) => (a === '--pool' ? [args[i + 1]!] : []));
    for (const p of pools) expect(recipe.pools[p]?.taskQueue).toBe(`infir2-${p}`);
  });

  it('holds no secret value: passwords and the codec key come from Secrets', () => {
    for (const { o } of objects) {
      const text = JSON.stringify(o);
      expect(text, o.metadata.name).not.toMatch(/"(POSTGRES_PASSWORD|POSTGRES_PWD|INFIR2_CODEC_KEY)","value"/);
    }
    const orchestrator = podOf(find('Deployment', 'infir2-orchestrator')).containers[0]!;
    expect(envOf(orchestrator, 'INFIR2_CODEC_KEY')?.valueFrom?.secretKeyRef?.name).toBe('infir2-codec');
  });

  it('is named in docs/cluster.md, with what was and was not checked', () => {
    const doc = read('docs/cluster.md');
    for (const f of files) expect(doc, f).toContain(relative(ROOT, join(DIR, f)));
    expect(doc).toMatch(/no real cluster/i);
  });
});
