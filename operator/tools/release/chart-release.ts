// The chart as a release packages it: its version and appVersion are the release's, and its
// images are the release's tag, pinned by digest where the release has one. Edits a copy's
// Chart.yaml and values.yaml as YAML documents, so the comments users read stay.
import { parseDocument } from 'yaml';

export interface ReleaseImage {
  repository: string;
  tag: string;
  /** sha256:..., only when read from the built image. */
  digest?: string;
}

export interface ChartRelease {
  version: string;
  operator: ReleaseImage;
  sandbox: ReleaseImage;
}

export function imageReference({ repository, tag, digest }: ReleaseImage): string {
  return digest ? `${repository}:${tag}@${digest}` : `${repository}:${tag}`;
}

export function releaseChartYaml(chartYaml: string, version: string): string {
  const document = parseDocument(chartYaml);
  document.set('version', version);
  document.set('appVersion', version);
  return document.toString({ lineWidth: 0 });
}

export function releaseValuesYaml(valuesYaml: string, release: ChartRelease): string {
  const document = parseDocument(valuesYaml);
  document.setIn(['image', 'repository'], release.operator.repository);
  document.setIn(['image', 'tag'], release.operator.tag);
  document.setIn(['image', 'digest'], release.operator.digest ?? '');
  document.setIn(['config', 'sandboxImage'], imageReference(release.sandbox));
  return document.toString({ lineWidth: 0 });
}
