/** Test helper: a strict well-formedness check of the bench's HTML report. */

/** Checks that every element is closed in order (void elements excepted); returns the tag names seen. */
export function checkWellFormed(html: string): string[] {
  const body = html.replace(/^<!DOCTYPE html>\s*/i, '');
  const stack: string[] = [];
  const seen: string[] = [];
  const voids = new Set(['meta', 'br', 'hr', 'img', 'link', 'input']);
  for (const m of body.matchAll(/<(\/?)([a-zA-Z][\w:-]*)([^>]*?)(\/?)>/g)) {
    const [, close, name, , self] = m;
    if (close) {
      const open = stack.pop();
      if (open !== name) throw new Error(`</${name}> closes <${open}>`);
    } else {
      seen.push(name!);
      if (!self && !voids.has(name!)) stack.push(name!);
    }
  }
  if (stack.length > 0) throw new Error(`unclosed: ${stack.join(', ')}`);
  return seen;
}
