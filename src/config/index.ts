// The YAML front end of the desired state.
export {
  loadDesiredState,
  loadDesiredStateFromSources,
  loadDesiredStateStreamed,
  loadDesiredStateStreamedOrWhole,
  StreamedBodies,
  type StreamedLoad,
  type StreamedSkeleton,
  type HandedPart,
  DEFAULT_STORE_NAME,
  type ConfigSource,
  type LoadOptions,
  type LoadResult,
} from './load.js';
export { expandPaths, displayPath } from './paths.js';
export {
  ConfigError,
  NotStreamable,
  formatDiagnostic,
  formatDiagnostics,
  formatPath,
  type Diagnostic,
  type PathSegment,
} from './diagnostics.js';
export { interpolateString, escapeInterpolation, type EnvMap } from './interpolate.js';
export { createAjv, loadSchema, schemaFilePath, validateAgainstSchema, EDITOR_KEYWORDS } from './schema.js';
export {
  SCHEMA_ID,
  SCHEMA_COPY_NAME,
  modeline,
  schemaRefFor,
  schemaReferenceFor,
  writeSchemaCopy,
  type SchemaReference,
} from './modeline.js';
export {
  initConfig,
  starterFor,
  renderStarterConfig,
  FileExistsError,
  type InitOptions,
  type InitResult,
} from './init.js';
export { desiredStateToYaml, type ExportOptions } from './export.js';
