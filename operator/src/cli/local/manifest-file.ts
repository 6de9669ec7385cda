// The file given to `run -f FILE --local`: one or more YAML (or JSON) documents holding
// exactly one CodingRun and, beside it, the ConfigMaps and Secrets it names (a scripted
// model's script, an API key, a git token). Only objects in the run's namespace count, as
// on a cluster. Reading is all this does; whether the run is valid is accept-local-run's.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, KIND, type CodingRun } from '../../api/index.ts';
import { ManifestError } from '../errors/manifest-error.ts';

export interface ManifestObjects {
  /** ConfigMap name → its data and binaryData keys (binaryData values stay base64). */
  configMaps: Map<string, { data: Record<string, string>; binaryData: Record<string, string> }>;
  /** Secret name → decoded values (data is base64, stringData plain and wins). */
  secrets: Map<string, Record<string, string>>;
  /** Secret name → its labels (security #11.3: a run uses only Secrets labelled usable-by-runs, locally too). */
  secretLabels?: Map<string, Record<string, string>>;
}

export interface LocalManifest extends ManifestObjects {
  /** What to call the file in messages. */
  source: string;
  /** Relative repository paths are resolved against this directory. */
  directory: string;
  run: CodingRun;
  /** Kinds other than CodingRun, ConfigMap and Secret, which local mode does not use. */
  ignored: string[];
}

interface KubeObject {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: { name?: unknown; namespace?: unknown };
  [field: string]: unknown;
}

async function readSource(file: string, stdin: NodeJS.ReadableStream): Promise<string> {
  if (file === '-') {
    let text = '';
    for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    return text;
  }
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (error as Error).message;
    throw new ManifestError(`cannot read ${file}: ${why}`);
  }
}

function objectsOf(text: string, source: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const [index, document] of parseAllDocuments(text).entries()) {
    const problem = document.errors[0];
    if (problem) throw new ManifestError(`${source}: document ${index + 1} is not valid YAML: ${problem.message.split('\n')[0]}`);
    const value: unknown = document.toJS();
    if (value === null || value === undefined) continue;
    if (typeof value !== 'object' || Array.isArray(value))
      throw new ManifestError(`${source}: document ${index + 1} is not a Kubernetes object (a mapping with apiVersion and kind)`);
    const object = value as KubeObject;
    // `kubectl get -o yaml` of several objects gives a List; take its items.
    if (object.kind === 'List' && Array.isArray(object.items)) objects.push(...(object.items as KubeObject[]));
    else objects.push(object);
  }
  return objects;
}

const nameOf = (object: KubeObject) => (typeof object.metadata?.name === 'string' ? object.metadata.name : undefined);
const namespaceOf = (object: KubeObject) =>
  typeof object.metadata?.namespace === 'string' && object.metadata.namespace ? object.metadata.namespace : undefined;

function stringMap(value: unknown, where: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new ManifestError(`${where} must be a mapping of keys to strings`);
  const map: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== 'string') throw new ManifestError(`${where}.${key} must be a string (quote it in YAML)`);
    map[key] = item;
  }
  return map;
}

/** Reads FILE ("-" for stdin) and picks out the run and the objects it may use. */
export async function readManifest(file: string, stdin: NodeJS.ReadableStream, namespaceFlag?: string): Promise<LocalManifest> {
  const source = file === '-' ? 'stdin' : file;
  const objects = objectsOf(await readSource(file, stdin), source);
  const runs = objects.filter((object) => object.kind === KIND);
  if (runs.length === 0) throw new ManifestError(`${source} holds no CodingRun (apiVersion: ${API_VERSION}, kind: ${KIND})`);
  if (runs.length > 1) {
    throw new ManifestError(
      `${source} holds ${runs.length} CodingRuns (${runs.map((run) => nameOf(run) ?? '(no name)').join(', ')}); run --local runs one: put each in its own file`,
    );
  }
  const raw = runs[0]!;
  if (raw.apiVersion !== API_VERSION)
    throw new ManifestError(`${source}: the CodingRun has apiVersion ${JSON.stringify(raw.apiVersion)}; use ${API_VERSION}`);
  const name = nameOf(raw);
  if (!name) throw new ManifestError(`${source}: the CodingRun has no metadata.name`);
  const ownNamespace = namespaceOf(raw);
  if (namespaceFlag && ownNamespace && namespaceFlag !== ownNamespace) {
    throw new ManifestError(
      `${source}: the namespace of codingrun/${name} ("${ownNamespace}") does not match --namespace "${namespaceFlag}"`,
    );
  }
  const namespace = ownNamespace ?? namespaceFlag ?? 'default';
  if (typeof raw.spec !== 'object' || raw.spec === null || Array.isArray(raw.spec))
    throw new ManifestError(`${source}: codingrun/${name} has no spec`);

  const manifest: LocalManifest = {
    source,
    directory: file === '-' ? process.cwd() : path.dirname(path.resolve(file)),
    run: { apiVersion: API_VERSION, kind: KIND, metadata: { name, namespace, uid: '' }, spec: raw.spec as CodingRun['spec'] },
    configMaps: new Map(),
    secrets: new Map(),
    secretLabels: new Map(),
    ignored: [],
  };
  const annotations = (raw.metadata as { annotations?: unknown }).annotations;
  if (annotations) manifest.run.metadata.annotations = stringMap(annotations, `${source}: codingrun/${name} metadata.annotations`);

  for (const object of objects) {
    if (object === raw) continue;
    const objectName = nameOf(object);
    const kind = typeof object.kind === 'string' ? object.kind : '(no kind)';
    // Objects of another namespace are invisible to the run, as on a cluster.
    if (!objectName || (namespaceOf(object) ?? namespace) !== namespace || (kind !== 'ConfigMap' && kind !== 'Secret')) {
      manifest.ignored.push(`${kind}/${objectName ?? '(no name)'}`);
      continue;
    }
    const where = `${source}: ${kind} ${objectName}`;
    if (kind === 'ConfigMap') {
      manifest.configMaps.set(objectName, {
        data: stringMap(object.data, `${where} data`),
        binaryData: stringMap(object.binaryData, `${where} binaryData`),
      });
    } else {
      const decoded = Object.fromEntries(
        Object.entries(stringMap(object.data, `${where} data`)).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
      );
      manifest.secrets.set(objectName, { ...decoded, ...stringMap(object.stringData, `${where} stringData`) });
      manifest.secretLabels!.set(objectName, stringMap((object.metadata as { labels?: unknown }).labels, `${where} metadata.labels`));
    }
  }
  return manifest;
}
