// A terraform-provider-kms that does nothing per call, for the floor of scenario 11
// (`node bench/run.js --only 11 --provider bench/lib/null-provider.js`, after `npm run build`): the
// same schema and the same gRPC server as the real provider (dist/provider/), but `ReadResource`
// and `PlanResourceChange` hand back the bytes Terraform sent, validation says nothing, and an
// apply fills unknown values with placeholders without a service. What Terraform spends beside it
// is Terraform's own cost for this schema and configuration, which no provider can take away.
import { servePlugin } from '../../dist/provider/plugin/serve.js';
import { loadSchemas, protoSchema, valueType } from '../../dist/provider/schema.js';
import { fromDynamic, toDynamic } from '../../dist/provider/values/codec.js';
import { UNKNOWN } from '../../dist/provider/values/types.js';

const schemas = loadSchemas();
const CAPABILITIES = { plan_destroy: true, get_provider_schema_optional: true };
const typeOf = (name) => valueType(schemas.resources[name]);
const PLACEHOLDER = { string: 'null-provider', number: 0, bool: false };

const impl = {
  GetMetadata: async () => ({
    server_capabilities: CAPABILITIES,
    resources: Object.keys(schemas.resources).map((type_name) => ({ type_name })),
    data_sources: [],
    ephemeral_resources: [],
    diagnostics: [],
  }),
  GetProviderSchema: async () => ({
    provider: protoSchema(schemas.provider, 'provider'),
    resource_schemas: Object.fromEntries(Object.entries(schemas.resources).map(([n, s]) => [n, protoSchema(s, n)])),
    data_source_schemas: {},
    ephemeral_resource_schemas: {},
    functions: {},
    server_capabilities: CAPABILITIES,
    diagnostics: [],
  }),
  ValidateProviderConfig: async () => ({ diagnostics: [] }),
  ConfigureProvider: async () => ({ diagnostics: [] }),
  ValidateResourceConfig: async () => ({ diagnostics: [] }),
  UpgradeResourceState: async (r) => ({ upgraded_state: { json: r.raw_state.json }, diagnostics: [] }),
  ReadResource: async (r) => ({ new_state: r.current_state, private: r.private, diagnostics: [] }),
  PlanResourceChange: async (r) => {
    const prior = r.prior_state?.msgpack;
    // A planned change of what exists: Terraform's proposal as it came (a no-op on an applied state).
    if (prior?.length && prior[0] !== 0xc0)
      return { planned_state: r.proposed_new_state, requires_replace: [], diagnostics: [] };
    // A create: computed attributes not set in the configuration are unknown until apply.
    const type = typeOf(r.type_name);
    const planned = fromDynamic(r.proposed_new_state, type);
    if (planned) {
      for (const [name, a] of Object.entries(schemas.resources[r.type_name].block.attributes ?? {}))
        if (a.computed && planned[name] === null) planned[name] = UNKNOWN;
    }
    return { planned_state: toDynamic(planned, type), requires_replace: [], diagnostics: [] };
  },
  ApplyResourceChange: async (r) => {
    const type = typeOf(r.type_name);
    const planned = fromDynamic(r.planned_state, type);
    if (planned)
      for (const [name, t] of Object.entries(type[1]))
        if (planned[name] === UNKNOWN) planned[name] = PLACEHOLDER[t] ?? null;
    return { new_state: toDynamic(planned, type), private: Buffer.alloc(0), diagnostics: [] };
  },
  StopProvider: async () => ({ Error: '' }),
};

await new Promise((resolve) => {
  servePlugin({ env: process.env, loadProvider: async () => impl, onStopped: resolve }).catch((e) => {
    process.stderr.write(`null-provider: ${e.message}\n`);
    process.exitCode = 1;
    resolve();
  });
});
process.exit();
