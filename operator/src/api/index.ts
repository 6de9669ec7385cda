// The CodingRun API: group names, spec and status schemas, the reason vocabulary.
export * from './group.ts';
export * from './duration.ts';
export * from './tool-names.ts';
export * from './providers.ts';
export * from './coding-run-spec.ts';
export * from './publish-spec.ts';
export * from './verify-spec.ts';
export * from './protect-glob.ts';
export * from './coding-run-status.ts';
export * from './verification-status.ts';
export * from './coding-run.ts';
export * from './reasons.ts';
export * from './run-failure.ts';
export * from './failure-messages.ts';
