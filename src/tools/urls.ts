/** Canonical form of a URL for lookups: no fragment, no trailing slash, decoded path. */
export function normalizeUrl(url: string): string {
  try {
    const u = new URL(url.trim());
    let path = u.pathname.replace(/\/+$/, "");
    try {
      path = decodeURIComponent(path);
    } catch {
      // keep the encoded path when it is not valid percent-encoding
    }
    return `${u.protocol}//${u.host.toLowerCase()}${path}${u.search}`;
  } catch {
    return url.trim().replace(/\/+$/, "");
  }
}
