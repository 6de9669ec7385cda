// The CRDs' patterns are read by the API server's RE2 and the operator's JavaScript alike only if
// they avoid the escapes the two read differently: `\s` is [\t\n\f\r ] to RE2 but also \v, U+00A0
// and the other Unicode spaces to JavaScript, so a URL ending in a no-break space passed
// `kubectl apply` and failed in the operator; and RE2 has no `\uXXXX` (api/portable-pattern.ts).
// test/integration/crd.test.ts applies such values to a real API server.
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { renderAllCrdYaml } from '../../operator/src/api/crd-yaml.ts';
import { codingRunSpec } from '../../operator/src/api/coding-run-spec.ts';
import { NOT_WHITESPACE, re2Pattern, WHITESPACE_CHARACTERS } from '../../operator/src/api/portable-pattern.ts';

/** Every `pattern` in a schema, with where it is. */
function patterns(node: unknown, path: string, out: Array<[string, string]>): Array<[string, string]> {
  if (Array.isArray(node)) node.forEach((child, index) => patterns(child, `${path}[${index}]`, out));
  else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'pattern' && typeof value === 'string') out.push([path, value]);
      else patterns(value, `${path}.${key}`, out);
    }
  }
  return out;
}

describe('whitespace in the CRD patterns', () => {
  it("matches exactly what JavaScript's \\s matches, every UTF-16 code unit", () => {
    const spelt = new RegExp(`[${WHITESPACE_CHARACTERS}]`);
    const differing: string[] = [];
    for (let unit = 0; unit <= 0xffff; unit++) {
      const character = String.fromCharCode(unit);
      if (spelt.test(character) !== /\s/.test(character)) differing.push(unit.toString(16));
    }
    expect(differing).toEqual([]);
    expect(new RegExp(`^${NOT_WHITESPACE}$`).test('\u00a0')).toBe(false);
  });

  it('uses only escapes RE2 reads as JavaScript does: no \\s, \\S or \\u in any generated CRD', () => {
    const found: Array<[string, string]> = [];
    for (const [file, text] of Object.entries(renderAllCrdYaml())) {
      for (const document of parseAllDocuments(text)) patterns(document.toJS(), file, found);
    }
    expect(found.length).toBeGreaterThan(10); // the control: the walk sees the patterns
    expect(found.filter(([, pattern]) => /\\[sSu]/.test(pattern))).toEqual([]);
    expect(found.some(([, pattern]) => pattern.includes('\\x{00a0}'))).toBe(true);
  });

  it.each([
    ['[\\u00a0]', '[\\x{00a0}]'],
    ['a\\u2028b', 'a\\x{2028}b'],
    // An escaped backslash before a u is a backslash and a u, in both engines.
    ['a\\\\u2028', 'a\\\\u2028'],
    ['a\\\\\\u2028', 'a\\\\\\x{2028}'],
    ['^[^\\t\\n]\\/x$', '^[^\\t\\n]\\/x$'],
  ])('re2Pattern(%s) is %s', (pattern, expected) => expect(re2Pattern(pattern)).toBe(expected));

  it.each([
    ['repository.url', { url: 'https://github.com/acme/webapp.git\u00a0' }],
    ['repository.url', { url: 'https://github.com/acme/webapp.git\u000b' }],
    ['repository.url', { url: 'https://github.com/acme/web\u3000app.git' }],
  ])('the operator refuses a Unicode or vertical-tab space in %s, as the CRD now does', (path, repository) => {
    const parsed = codingRunSpec.safeParse({ task: 't', repository, model: { provider: 'scripted', scriptRef: { name: 's' } } });
    expect(parsed.error?.issues.map((issue) => issue.path.join('.'))).toContain(path);
  });
});
