// Image references as the runtimes read them: what a verifying webhook writes at admission names
// the image the operator built the pod with, and a look-alike in another repository does not.
import { describe, expect, it } from 'vitest';
import { admittedForm, normalizeImage } from '../../operator/src/reconcile/image-reference.ts';

const DIGEST = `sha256:${'0a'.repeat(32)}`;

describe('normalizeImage', () => {
  it.each([
    ['ubuntu', { repository: 'docker.io/library/ubuntu', tag: 'latest' }],
    ['ubuntu:22.04', { repository: 'docker.io/library/ubuntu', tag: '22.04' }],
    ['index.docker.io/library/ubuntu:22.04', { repository: 'docker.io/library/ubuntu', tag: '22.04' }],
    ['docker.io/ubuntu', { repository: 'docker.io/library/ubuntu', tag: 'latest' }],
    ['acme/builder:2', { repository: 'docker.io/acme/builder', tag: '2' }],
    [`acme/builder@${DIGEST}`, { repository: 'docker.io/acme/builder', digest: DIGEST }],
    ['localhost/team/img', { repository: 'localhost/team/img', tag: 'latest' }],
    ['registry.example:5000/team/img:1.2', { repository: 'registry.example:5000/team/img', tag: '1.2' }],
    [`registry.example/team/img:1.2@${DIGEST}`, { repository: 'registry.example/team/img', tag: '1.2', digest: DIGEST }],
  ])('%s', (image, normalized) => {
    expect(normalizeImage(image)).toEqual(normalized);
  });

  it('reads no string that is not an image reference', () => {
    expect(normalizeImage('Acme/Builder')).toBeUndefined();
    expect(normalizeImage(`acme/builder@${DIGEST}@${DIGEST}`)).toBeUndefined();
  });
});

describe('admittedForm: how the admitted reference names the built one', () => {
  it.each([
    // [admitted, built, form]
    ['acme/builder:2', 'acme/builder:2', 'same'],
    ['docker.io/acme/builder:2', 'acme/builder:2', 'same'],
    ['index.docker.io/library/ubuntu:22.04', 'ubuntu:22.04', 'same'],
    ['registry.example/team/img:latest', 'registry.example/team/img', 'same'],
    [`docker.io/acme/builder:2@${DIGEST}`, 'acme/builder:2', 'pinned'],
    [`registry.example/team/img@${DIGEST}`, 'registry.example/team/img:1.2', 'pinned'],
    [`index.docker.io/library/ubuntu@${DIGEST}`, 'ubuntu:22.04', 'pinned'],
    [`registry.example/team/img:latest@${DIGEST}`, 'registry.example/team/img', 'pinned'],
    [`docker.io/acme/builder@${DIGEST}`, `acme/builder:2@${DIGEST}`, 'same'],
    [`acme/builder:2@sha256:${'bb'.repeat(32)}`, `acme/builder:2@${DIGEST}`, undefined],
    [`acme/builder:3@${DIGEST}`, 'acme/builder:2', undefined],
    ['acme/builder:3', 'acme/builder:2', undefined],
    [`acme/builder-evil:2@${DIGEST}`, 'acme/builder:2', undefined],
    [`mirror.example/acme/builder:2@${DIGEST}`, 'acme/builder:2', undefined],
    [`docker.io/library/builder:2@${DIGEST}`, 'acme/builder:2', undefined],
    ['acme/builder:2@md5:0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a', 'acme/builder:2', undefined],
  ])('%s for %s: %s', (admitted, built, form) => {
    expect(admittedForm(admitted, built)).toBe(form);
  });
});
