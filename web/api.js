// api.js: every call the portal makes goes through here, to the public API
// (docs/api.md) with the user's token. The token lives in sessionStorage only: it is
// gone when the tab closes, and no other page of the browser sees it.

const KEY = 'gpuorch.token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  sessionStorage.setItem(KEY, t);
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Called when the server no longer knows the token (401): the app signs out.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) {
  onUnauthorized = f;
}

// api('GET', '/jobs?state=active') -> the parsed JSON reply; throws ApiError with the
// server's sentence on 4xx/5xx. opts.yaml sends body as YAML text; opts.text returns
// the reply as text.
export async function api(method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${token() || ''}` };
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = opts.yaml ? 'application/yaml' : 'application/json';
    payload = opts.yaml ? body : JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(`/api/v1${path}`, { method, headers, body: payload, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'the gpuorch server cannot be reached');
  }
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text;
    try {
      msg = JSON.parse(text).error || text;
    } catch (e) {
      // not JSON: the text is the message
    }
    if (resp.status === 401) onUnauthorized(msg);
    throw new ApiError(resp.status, msg || `HTTP ${resp.status}`);
  }
  if (opts.text) return text;
  return text ? JSON.parse(text) : null;
}
