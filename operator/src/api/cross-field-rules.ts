// Rules that one field alone cannot express. Each rule is written twice on purpose, in the
// two languages that must enforce it: CEL for the API server (so `kubectl apply` refuses
// the manifest) and a TypeScript predicate for the operator (which re-validates every run,
// since a CRD can be installed without its validation or edited by hand).
// Keeping both in one record makes it hard to change one and forget the other; a unit test
// runs every rule's examples through the predicate and an integration test through CEL.

export interface CrossFieldRule<T> {
  /** CEL expression, evaluated with `self` bound to the object the rule sits on. */
  rule: string;
  /** Shown by the API server when the rule fails; says what to change. */
  message: string;
  /** Field the message is about, relative to the object (`.baseURL`); the API server prefixes it. */
  fieldPath?: string;
  /** Machine-readable reason for the API server (FieldValueRequired, FieldValueForbidden, FieldValueInvalid). */
  reason?: 'FieldValueRequired' | 'FieldValueForbidden' | 'FieldValueInvalid';
  /** The same rule for the operator. */
  holds(self: T): boolean;
}

/** What the CRD's `x-kubernetes-validations` wants for a list of rules. */
export function celValidations<T>(rules: readonly CrossFieldRule<T>[]) {
  return rules.map(({ rule, message, fieldPath, reason }) => ({
    rule,
    message,
    ...(fieldPath ? { fieldPath } : {}),
    ...(reason ? { reason } : {}),
  }));
}
