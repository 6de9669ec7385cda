// The tool contract in one import: names, input schemas, descriptions, limits, error codes,
// result types and the line protocol. Pure (zod only) so the operator can import it without
// the toolbox runtime.
export * from './limits.ts';
export * from './error-codes.ts';
export * from './tool-schemas.ts';
export * from './tool-descriptions.ts';
export type * from './tool-results.ts';
export * from './protocol.ts';
export * from './sandbox-init.ts';
