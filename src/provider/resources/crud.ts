// Create/read/update/delete of each kind through the per-kind handlers of apply/ (pending).
import type { ResourceType } from './types.js';

type Crud = Pick<ResourceType, 'create' | 'read' | 'update' | 'delete'>;

export function crud(kind: string): Crud {
  const pending = async (): Promise<never> => {
    throw new Error(`${kind}: changes are not wired to the apply handlers yet`);
  };
  return { create: pending, read: pending, update: pending, delete: pending };
}
