// api.js - the UI's one way to the AX API (/api/v1 on this origin).
//
// The token lives in sessionStorage (this tab, until it closes), goes out
// as "Authorization: Bearer" and never into a URL. A 401 forgets it and
// returns to sign-in; other errors throw ApiError with the API's
// {"error", "detail"}.

const KEY = 'ax.token';
let onSignedOut = () => {};

export function token() { return sessionStorage.getItem(KEY); }
export function setToken(t) { sessionStorage.setItem(KEY, t); }
export function signOut() { sessionStorage.removeItem(KEY); onSignedOut(); }
export function whenSignedOut(fn) { onSignedOut = fn; }

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail ? `${detail} (${status} ${code})` : `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

// Query string from an object, leaving out empty values.
export function qs(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o || {}))
    if (v !== null && v !== undefined && v !== '') p.set(k, v);
  const t = p.toString();
  return t ? '?' + t : '';
}

// Calls the API: JSON answers parsed, text answers as text; opt.raw returns
// the Response (for streams). opt.body is sent as JSON. opt.probe: a 401
// only throws (sign-in tries a token without signing out).
export async function api(path, opt = {}) {
  const headers = { Authorization: 'Bearer ' + (token() || '') };
  let body;
  if (opt.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opt.body);
  }
  const res = await fetch('/api/v1' + path, {
    method: opt.method || 'GET', headers, body, signal: opt.signal,
    cache: 'no-store', credentials: 'omit',
  });
  if (res.status === 401) {
    const j = await res.json().catch(() => ({}));
    if (!opt.probe) signOut();
    throw new ApiError(401, j.error || 'unauthorized', j.detail);
  }
  if (!res.ok) {
    const j = await res.json().catch(() => ({}));
    throw new ApiError(res.status, j.error || 'error', j.detail || res.statusText);
  }
  if (opt.raw) return res;
  const ct = res.headers.get('Content-Type') || '';
  return ct.includes('json') ? res.json() : res.text();
}
