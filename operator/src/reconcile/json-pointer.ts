// A JSON Pointer segment (RFC 6901) for the JSON Patches the operator sends: label keys such as
// chamvi.dev/run-uid hold a `/`, which a pointer must escape (and `~`, escaped first). Pure.

/** `segment` as one step of a JSON Pointer: `~` as `~0`, `/` as `~1`. */
export const jsonPointerSegment = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** The pointer to a label of an object's metadata. */
export const labelPointer = (key: string) => `/metadata/labels/${jsonPointerSegment(key)}`;
