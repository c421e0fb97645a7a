// Data sources: read-only views of live objects by natural id (pending the listing readers).
import type { DataSourceType } from './types.js';
import { check, matches, PROJECT_ENV, PROJECT_SLUG } from './types.js';

const pending = async (): Promise<never> => {
  throw new Error('data sources are not wired yet');
};

export const dataSources: DataSourceType[] = [
  { typeName: 'kms_project', validate: (c, d) => check(d, c, 'slug', 'Invalid project slug', matches(PROJECT_SLUG, 'a project slug')), read: pending },
  ...['kms_environment', 'kms_template', 'kms_client', 'kms_endpoint'].map((typeName) => ({
    typeName,
    validate: (c: Parameters<DataSourceType['validate']>[0], d: Parameters<DataSourceType['validate']>[1]) =>
      check(d, c, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production')),
    read: pending,
  })),
];
