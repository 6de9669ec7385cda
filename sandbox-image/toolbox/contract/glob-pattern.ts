// Shared by the toolbox (glob, list_files, protected paths) and the operator (which files of a clone are protected).
// Compiles a glob to a RegExp matched against a whole '/'-separated relative path:
// `**` spans any number of directories, `*` and `?` stay inside one segment, `[...]` is a
// character class and `{a,b}` an alternation.
export function globToRegExp(glob: string): RegExp {
  let source = '';
  let braceDepth = 0;
  for (let index = 0; index < glob.length; index += 1) {
    const char = glob[index] as string;
    if (char === '*') {
      if (glob[index + 1] === '*') {
        const atSegmentStart = index === 0 || glob[index - 1] === '/';
        index += 1;
        if (atSegmentStart && glob[index + 1] === '/') {
          index += 1;
          source += '(?:[^/]+/)*'; // "**/": zero or more whole directories
        } else {
          source += '.*';
        }
      } else {
        source += '[^/]*';
      }
    } else if (char === '?') {
      source += '[^/]';
    } else if (char === '[') {
      const close = glob.indexOf(']', index + 2);
      if (close === -1) {
        source += '\\[';
      } else {
        let body = glob.slice(index + 1, close);
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        source += `[${body.replace(/\\/g, '\\\\')}]`;
        index = close;
      }
    } else if (char === '{') {
      braceDepth += 1;
      source += '(?:';
    } else if (char === '}' && braceDepth > 0) {
      braceDepth -= 1;
      source += ')';
    } else if (char === ',' && braceDepth > 0) {
      source += '|';
    } else {
      source += char.replace(/[.+^${}()|\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}
