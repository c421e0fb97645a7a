// The registry of resource and data source types: adding a kind is adding one file and a line here.
import { client } from './client.js';
import { environment } from './environment.js';
import { endpoint } from './endpoint.js';
import { key } from './key.js';
import { project } from './project.js';
import { template } from './template.js';
import type { DataSourceType, EphemeralResourceType, ResourceType } from './types.js';
import { dataSources } from './data-sources.js';
import { keySecret } from './key-secret.js';

export const resourceTypes: Record<string, ResourceType> = Object.fromEntries(
  [project, environment, template, client, key, endpoint].map((r) => [r.typeName, r]),
);

export const dataSourceTypes: Record<string, DataSourceType> = Object.fromEntries(
  dataSources.map((d) => [d.typeName, d]),
);

export const ephemeralResourceTypes: Record<string, EphemeralResourceType> = Object.fromEntries(
  [keySecret].map((r) => [r.typeName, r]),
);
