// The request target (`/api/v1/client/abc?project_env=x`) read strictly: malformed or non-UTF-8
// percent-encoding anywhere is a 400 naming the part, never a URIError (a 500) further down.
import { ApiError } from './errors.js';

export interface RequestTarget {
  /** The path, still percent-encoded (route patterns match it; parameters are decoded one by one). */
  path: string;
  /** Query parameters, decoded (`+` is a space, as in forms). */
  query: URLSearchParams;
}

const invalid = (message: string) => new ApiError(400, 'INVALID_URL', message);

/** A bounded, quoted excerpt of what the client sent, safe to put in a message. */
export function excerpt(text: string, max = 80): string {
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text);
}

const BAD_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

/** Decodes one component; `what` names it in the error ("the path", "query parameter 'x'"). */
export function decodeComponent(raw: string, what: string): string {
  const bad = BAD_ESCAPE.exec(raw);
  if (bad) {
    throw invalid(
      `${what} has a malformed percent-escape ${excerpt(raw.slice(bad.index, bad.index + 3))} ` +
        `(a % must be followed by two hex digits): ${excerpt(raw)}`,
    );
  }
  try {
    return decodeURIComponent(raw);
  } catch {
    throw invalid(`${what} percent-encodes bytes that are not valid UTF-8: ${excerpt(raw)}`);
  }
}

/**
 * Origin form (`/path?query`) and absolute form (`http://host/path?query`, RFC 9112 §3.2.2) are
 * accepted; anything else (`*`, a bare word) is a 400.
 */
export function parseRequestTarget(raw: string): RequestTarget {
  let target = raw;
  if (/^https?:\/\//i.test(target)) {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw invalid(`the request target is not a valid URL: ${excerpt(raw)}`);
    }
    target = `${url.pathname}${url.search}`;
  } else if (!target.startsWith('/')) {
    throw invalid(`the request target must be a path starting with "/": ${excerpt(raw)}`);
  }
  const hash = target.indexOf('#');
  if (hash >= 0) target = target.slice(0, hash);
  const q = target.indexOf('?');
  const path = q >= 0 ? target.slice(0, q) : target;
  decodeComponent(path, 'the path');
  const query = new URLSearchParams();
  if (q >= 0) {
    for (const pair of target.slice(q + 1).split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      const rawName = eq >= 0 ? pair.slice(0, eq) : pair;
      const name = decodeComponent(rawName.replaceAll('+', ' '), 'a query parameter name');
      const value =
        eq >= 0 ? decodeComponent(pair.slice(eq + 1).replaceAll('+', ' '), `query parameter ${excerpt(name, 40)}`) : '';
      query.append(name, value);
    }
  }
  return { path, query };
}
