export { startEmulator, seedService, API_BASE, type EmulatorOptions, type RunningEmulator, type FaultRule, type FaultMode } from './server.js';
export { KmsService, CUSTOMER_KEY_PREFIX } from './service.js';
export { encryptForServer, ENCRYPTION_ALG } from './encryption.js';
