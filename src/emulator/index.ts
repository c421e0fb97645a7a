export {
  startEmulator,
  seedService,
  API_BASE,
  EmulatorStartError,
  type EmulatorOptions,
  type RunningEmulator,
  type FaultRule,
  type FaultMode,
  type SeedRequest,
} from './server.js';
export { DataFileError } from './data-file.js';
export { KmsService, CUSTOMER_KEY_PREFIX } from './service.js';
export { encryptForServer, ENCRYPTION_ALG } from './encryption.js';
