// What the reconciler remembers of the DELETEs it sent (controller/deletions-sent.ts): the
// object it deleted counts as deleted while a cache that has not caught up still shows it,
// and is forgotten once the cache shows it gone or a new object (new uid) under the name.
import { describe, expect, it } from 'vitest';
import { DeletionsSent } from '../../operator/src/controller/deletions-sent.ts';

const object = (uid: string) => ({ metadata: { name: 'p', uid } });

describe('DeletionsSent', () => {
  it('counts an object this process deleted as deleted while the cache still shows it', () => {
    const sent = new DeletionsSent();
    expect(sent.deleted('ns/run', 'Pod', 'p', object('u1'))).toBe(false);
    sent.note('ns/run', 'Pod', object('u1'));
    expect(sent.deleted('ns/run', 'Pod', 'p', object('u1'))).toBe(true);
    expect(sent.deleted('ns/run', 'Pod', 'p', object('u1'))).toBe(true);
    // Another kind, another run: not the same deletion.
    expect(sent.deleted('ns/run', 'NetworkPolicy', 'p', object('u1'))).toBe(false);
    expect(sent.deleted('ns/other', 'Pod', 'p', object('u1'))).toBe(false);
  });

  it('forgets a deletion once the cache shows the object gone, and never hides a new object of the name', () => {
    const sent = new DeletionsSent();
    sent.note('ns/run', 'Pod', object('u1'));
    expect(sent.deleted('ns/run', 'Pod', 'p', object('u2'))).toBe(false);
    sent.note('ns/run', 'Pod', object('u1'));
    expect(sent.deleted('ns/run', 'Pod', 'p', undefined)).toBe(false);
    // Forgotten: the same uid showing again (a cache going back) is not taken as deleted any more.
    expect(sent.deleted('ns/run', 'Pod', 'p', object('u1'))).toBe(false);
  });

  it('forgets everything of a run that is gone', () => {
    const sent = new DeletionsSent();
    sent.note('ns/run', 'NetworkPolicy', object('u1'));
    sent.forgetRun('ns/run');
    expect(sent.deleted('ns/run', 'NetworkPolicy', 'p', object('u1'))).toBe(false);
  });
});
