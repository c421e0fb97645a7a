// Which service a key belongs to. One configuration folder is often applied to several services
// (staging and production, an sk_test_ and an sk_live_ credential): their keys share names, so a
// secret records the target it was issued by, and a store write never lets one target replace
// another target's secret (DESIGN.md "Keys").

/** Where the target comes from when it is not derived from the URL and credential. */
export const TARGET_ENV = 'KMS_SYNC_TARGET';

export type CredentialKind = 'live' | 'test' | 'unknown';

/** From the credential's prefix only: the key itself is never kept. */
export function credentialKind(apiKey: string): CredentialKind {
  return apiKey.startsWith('sk_live_') ? 'live' : apiKey.startsWith('sk_test_') ? 'test' : 'unknown';
}

/**
 * The target id: declared (`KMS_SYNC_TARGET`, for a service reached under several URLs), else
 * the API URL without credentials, query or trailing slash (host lower-cased, default port
 * dropped by URL) and the credential kind: `https://kms.example.com/api/v1#live`.
 */
export function serviceTarget(url: string, credential: CredentialKind, env: NodeJS.ProcessEnv = process.env): string {
  const declared = env[TARGET_ENV]?.trim();
  if (declared) return declared;
  let base = url;
  try {
    const u = new URL(url);
    base = `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    // not a URL: the caller refuses it before any request; keep the text as the id
  }
  return `${base}#${credential}`;
}
