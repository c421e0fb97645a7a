// Typed operations of the service (interface section 4). Wire types are read tolerantly: every
// field the spec does not guarantee is optional, unknown fields are ignored.
import { HttpTransport, type HttpOptions } from './http.js';
import {
  arrayOf,
  clientShape,
  clientWithKeysShape,
  endpointShape,
  logShape,
  objectWith,
  pageOf,
  projectShape,
  templateShape,
  type Shape,
} from './shapes.js';

export interface WireTemplate {
  id: string;
  name: string;
  rateLimitDay?: number;
  maxClients?: number;
}

export interface WireEnv {
  id?: string;
  project_env: string;
  type?: string;
  url?: string;
  templates?: WireTemplate[];
  clients?: { count?: number; max?: number };
}

export interface WireProject {
  slug: string;
  name?: string;
  description?: string;
  envs?: { count?: number; list?: WireEnv[] };
}

export interface WireKey {
  id: string;
  name: string;
  expiresAt?: string | null;
  autoRotate?: boolean;
  createdAt?: string;
  /** Raw secret: present only in the response that created the key. */
  key?: string;
}

export interface WireClient {
  id?: string;
  client_uuid?: string;
  name: string;
  type?: string;
  templateId?: string | null;
  ipWhitelist?: string[];
  metadata?: Record<string, unknown>;
  keys?: WireKey[];
  project_env?: string;
}

export interface WireEndpoint {
  method: string;
  path: string;
  name?: string;
  description?: string;
  request?: Record<string, unknown>;
  response?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  method_path?: string;
}

export interface WireLog {
  id: string;
  clientId: string;
  status: 'success' | 'error';
  durationMs?: number;
  timestamp?: string;
  method_path?: string;
  name?: string;
}

export interface WirePage<T> {
  data: T[];
  pagination?: { total?: number; page?: number; limit?: number; pages?: number };
}

export interface TemplateInput {
  name: string;
  rateLimitDay: number;
  maxClients?: number;
}
export interface KeyInput {
  name: string;
  expiresAt?: string | null;
  autoRotate?: boolean;
}
export interface ClientInput {
  name: string;
  type?: string;
  templateId: string;
  ipWhitelist?: string[];
  metadata?: Record<string, unknown>;
  keys?: KeyInput[];
}
export interface ClientUpdate {
  name?: string;
  type?: string;
  templateId?: string;
  ipWhitelist?: string[];
  metadata?: Record<string, unknown>;
  keys?: (KeyInput & { id?: string })[];
}
export interface EndpointInput {
  method: string;
  path: string;
  name?: string;
  description?: string;
  request?: Record<string, unknown>;
  response?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export const PAGE_LIMIT = 100;
export const BULK_LIMIT = 100;

export const clientId = (c: WireClient): string => (c.id ?? c.client_uuid)!;

/** The item shape of each paged list (by path), so every caller of `listAll` gets it checked. */
const ITEM_SHAPES: Record<string, Shape> = {
  '/project': projectShape,
  '/client/templates': templateShape,
  '/client': clientShape,
  '/endpoint': endpointShape,
};
const anyObject = objectWith('an object');

/** One page of a paged list has been read: `pages` is that list's page count (known from page 1). */
export interface PageRead {
  kind: string;
  page: number;
  pages: number;
}

export class KmsClient {
  readonly http: HttpTransport;
  /** Told of every page read (the CLI's "pages read / total" line while a plan reads). */
  onPageRead: ((e: PageRead) => void) | undefined;
  /**
   * Pages read by a read started before its progress line was drawn (ReadAhead), counted while
   * nothing else counts them: the line starts from them instead of missing the lists read first.
   */
  pagesAhead: { done: number; lists: number[] } | undefined;
  constructor(options: HttpOptions | HttpTransport) {
    this.http = options instanceof HttpTransport ? options : new HttpTransport(options);
  }

  close() {
    return this.http.close();
  }

  /**
   * Every page of a paged list, handed to `onPage` as it arrives: page 1 first (it tells the page
   * count), then the remaining pages concurrently (bounded by the transport's parallelism). A
   * reader that converts each page at once lets the wire objects die young instead of holding
   * every item of a 100,000-item list until the last page is in.
   */
  async forEachPage<T>(
    path: string,
    query: Record<string, string | undefined>,
    kind: string,
    onPage: (items: T[], page: number, pages: number) => void,
  ): Promise<void> {
    // Every page must be the documented envelope: `{}` is not an empty list (a wrong URL answers like that).
    const expect = pageOf(ITEM_SHAPES[path] ?? anyObject);
    const first = await this.http.request<WirePage<T>>({
      method: 'GET',
      path,
      query: { ...query, page: 1, limit: PAGE_LIMIT },
      kind,
      expect,
    });
    const data = first.data;
    const limit = first.pagination?.limit || PAGE_LIMIT;
    const pages = first.pagination?.pages ?? Math.ceil((first.pagination?.total ?? data.length) / Math.max(1, limit));
    onPage(data, 1, Math.max(1, pages));
    this.pageRead({ kind, page: 1, pages: Math.max(1, pages) });
    if (pages <= 1) return;
    // As many loops as the transport has requests on the wire, each asking for the next page once
    // its last is in; not a request per page started at once. Those wait for a slot long enough
    // to be moved to the old generation, and a finished one there still points at its page: the
    // young-generation collections keep every page read since the last full collection (100,000
    // clients: ~84% of each scavenge survived and was copied, then promoted, with no page kept).
    let next = 2;
    let failed = false;
    const loop = async () => {
      for (let n = next++; n <= pages && !failed; n = next++) {
        const page = await this.http
          .request<WirePage<T>>({ method: 'GET', path, query: { ...query, page: n, limit: PAGE_LIMIT }, kind, expect })
          .catch((e: unknown) => {
            failed = true;
            throw e;
          });
        onPage(page.data, n, pages);
        this.pageRead({ kind, page: n, pages });
      }
    };
    await Promise.all(Array.from({ length: Math.min(pages - 1, this.http.readSlots) }, loop));
  }

  private pageRead(e: PageRead): void {
    if (this.pagesAhead) {
      this.pagesAhead.done++;
      if (e.page === 1) this.pagesAhead.lists.push(e.pages);
    }
    this.onPageRead?.(e);
  }

  /** Every item of a paged list, in page order (see `forEachPage`). */
  async listAll<T>(path: string, query: Record<string, string | undefined>, kind: string): Promise<T[]> {
    const pages: T[][] = [];
    await this.forEachPage<T>(path, query, kind, (items, page) => {
      pages[page - 1] = items;
    });
    return pages.length === 1 ? [...pages[0]!] : pages.flat();
  }

  // ---------------------------------------------------------------- projects
  listProjects() {
    return this.listAll<WireProject>('/project', {}, 'list projects');
  }
  getProject(projectEnv: string) {
    return this.http.request<WireProject>({
      method: 'GET',
      path: `/project/${encodeURIComponent(projectEnv)}`,
      kind: 'get project',
      expect: projectShape,
    });
  }
  createProject(body: {
    slug: string;
    name: string;
    description?: string;
    envs: { type: string; url: string; templates: TemplateInput[] }[];
  }) {
    return this.http.request<WireProject>({
      method: 'POST',
      path: '/project',
      body,
      kind: 'create project',
      expect: projectShape,
    });
  }
  updateProject(
    projectEnv: string,
    body: { name?: string; singleEnv?: { url?: string; templates?: (Partial<TemplateInput> & { id?: string })[] } },
  ) {
    return this.http.request<WireProject>({
      method: 'PUT',
      path: `/project/${encodeURIComponent(projectEnv)}`,
      body,
      kind: 'update project',
      expect: projectShape,
    });
  }
  deleteProject(
    projectEnv: string,
    query: { kind: 'project' | 'env' | 'template'; envId?: string; templateId?: string; forceDelete?: boolean },
  ) {
    return this.http.request<{ success: boolean }>({
      method: 'DELETE',
      path: `/project/${encodeURIComponent(projectEnv)}`,
      query,
      kind: `delete ${query.kind}`,
    });
  }
  listLogs(
    projectEnv: string,
    filters: { methodPath?: string; clientId?: string; status?: 'success' | 'error'; page?: number; limit?: number },
  ) {
    return this.http.request<WirePage<WireLog>>({
      method: 'GET',
      path: `/project/${encodeURIComponent(projectEnv)}/logs`,
      query: { ...filters },
      kind: 'list logs',
      expect: pageOf(logShape),
    });
  }

  // ---------------------------------------------------------------- templates & clients
  listTemplates(projectEnv: string) {
    return this.listAll<WireTemplate>('/client/templates', { project_env: projectEnv }, 'list templates');
  }
  listClients(projectEnv: string) {
    return this.listAll<WireClient>('/client', { project_env: projectEnv }, 'list clients');
  }
  /** The clients of an environment, page by page as the pages arrive (in no particular order; `page` counts from 1). */
  forEachClientPage(projectEnv: string, onPage: (clients: WireClient[], page: number, pages: number) => void) {
    return this.forEachPage<WireClient>('/client', { project_env: projectEnv }, 'list clients', onPage);
  }
  getClient(id: string, projectEnv: string) {
    return this.http.request<WireClient>({
      method: 'GET',
      path: `/client/${encodeURIComponent(id)}`,
      query: { project_env: projectEnv },
      kind: 'get client',
      expect: clientShape,
    });
  }
  /** Bulk create (array body): one request for up to BULK_LIMIT clients. */
  createClients(projectEnv: string, clients: ClientInput[]) {
    // The raw keys exist only in this answer: one that is not a client per item sent is ambiguous.
    return this.http.request<WireClient[]>({
      method: 'POST',
      path: '/client',
      query: { project_env: projectEnv },
      body: clients,
      kind: 'create clients',
      expect: arrayOf(clientWithKeysShape, clients.length),
      issuesKeys: clients.some((c) => (c.keys ?? []).length > 0),
    });
  }
  updateClient(id: string, projectEnv: string, body: ClientUpdate) {
    const issuesKeys = (body.keys ?? []).some((k) => k.id === undefined);
    return this.http.request<WireClient>({
      method: 'PUT',
      path: `/client/${encodeURIComponent(id)}`,
      query: { project_env: projectEnv },
      body,
      kind: 'update client',
      retrySafe: !issuesKeys,
      issuesKeys,
      expect: clientWithKeysShape,
    });
  }
  deleteClient(id: string, projectEnv: string, keyId?: string) {
    return this.http.request<unknown>({
      method: 'DELETE',
      path: `/client/${encodeURIComponent(id)}`,
      query: { project_env: projectEnv, keyId },
      kind: keyId ? 'delete key' : 'delete client',
    });
  }

  // ---------------------------------------------------------------- endpoints
  listEndpoints(projectEnv: string) {
    return this.listAll<WireEndpoint>('/endpoint', { project_env: projectEnv }, 'list endpoints');
  }
  createEndpoints(projectEnv: string, endpoints: EndpointInput[]) {
    return this.http.request<WireEndpoint[]>({
      method: 'POST',
      path: '/endpoint',
      query: { project_env: projectEnv },
      body: endpoints,
      kind: 'create endpoints',
      expect: arrayOf(endpointShape, endpoints.length),
    });
  }
  getEndpoint(projectEnv: string, methodPath: string) {
    return this.http.request<WireEndpoint>({
      method: 'GET',
      path: `/endpoint/${encodeURIComponent(methodPath)}`,
      query: { project_env: projectEnv },
      kind: 'get endpoint',
      expect: endpointShape,
    });
  }
  updateEndpoint(
    projectEnv: string,
    methodPath: string,
    body: { name?: string; description?: string; metadata?: Record<string, unknown> },
  ) {
    return this.http.request<WireEndpoint>({
      method: 'PUT',
      path: `/endpoint/${encodeURIComponent(methodPath)}`,
      query: { project_env: projectEnv },
      body,
      kind: 'update endpoint',
      expect: endpointShape,
    });
  }
  deleteEndpoint(projectEnv: string, methodPath: string) {
    return this.http.request<unknown>({
      method: 'DELETE',
      path: `/endpoint/${encodeURIComponent(methodPath)}`,
      query: { project_env: projectEnv },
      kind: 'delete endpoint',
    });
  }
}
