// Higher-level constructs over the generated kms_* resources, so a stack reads like the YAML:
// a project adds environments, an environment adds templates, clients and endpoints, a client adds
// keys. Each is the generated resource itself (a subclass), so every generated attribute, token
// getter and meta-argument stays available; they only fill in the parent attributes by reference.
// Hand-written for cdktf; `npm run generate` derives the cdktn copy from this file.
import type { Construct } from 'constructs';
import { Client, type ClientConfig } from './kms/client/index.js';
import { DataKmsProject } from './kms/data-kms-project/index.js';
import { Endpoint, type EndpointConfig } from './kms/endpoint/index.js';
import { Environment, type EnvironmentConfig } from './kms/environment/index.js';
import { Key, type KeyConfig } from './kms/key/index.js';
import { Project } from './kms/project/index.js';
import { Template, type TemplateConfig } from './kms/template/index.js';

/** An environment: a kms_environment construct, or its `<project>-<type>` slug when defined elsewhere. */
export type EnvironmentRef = Environment | string;

const projectEnvOf = (env: EnvironmentRef): string => (typeof env === 'string' ? env : env.projectEnv);

export type TemplateProps = Omit<TemplateConfig, 'projectEnv' | 'name'>;
export type KeyProps = Omit<KeyConfig, 'projectEnv' | 'client' | 'name'>;
export type EndpointProps = Omit<EndpointConfig, 'projectEnv' | 'method' | 'path'> & {
  /** Construct id (default: `<METHOD> <path segments joined by dots>`). */
  id?: string;
};

export interface KmsClientConfig extends Omit<ClientConfig, 'projectEnv' | 'template'> {
  environment: EnvironmentRef;
  /** A template construct, or the name of a template of the same environment. */
  template: Template | string;
  /** Keys of the client by name (more with addKey). */
  keys?: Record<string, KeyProps>;
}

/** A kms_client that owns its kms_key resources. */
export class KmsClient extends Client {
  /** The keys added so far, by name. */
  readonly keys: Record<string, Key> = {};

  constructor(scope: Construct, id: string, config: KmsClientConfig) {
    const { environment, template, keys, ...rest } = config;
    super(scope, id, {
      ...rest,
      projectEnv: projectEnvOf(environment),
      template: typeof template === 'string' ? template : template.name,
    });
    for (const [name, props] of Object.entries(keys ?? {})) this.addKey(name, props);
  }

  /** A key of this client; its raw value goes to the secret store it names, never into state. */
  addKey(name: string, props: KeyProps = {}): Key {
    const key = new Key(this, name, { ...props, projectEnv: this.projectEnv, client: this.name, name });
    this.keys[name] = key;
    return key;
  }
}

export interface KmsEnvironmentConfig extends Omit<EnvironmentConfig, 'project'> {
  /** The project construct (KmsProject, or KmsExternalProject for one defined elsewhere), or its slug. */
  project: Project | DataKmsProject | string;
}

/** A kms_environment that adds its templates, clients and endpoints. */
export class KmsEnvironment extends Environment {
  private readonly templatesByName = new Map<string, Template>();

  constructor(scope: Construct, id: string, config: KmsEnvironmentConfig) {
    const { project, ...rest } = config;
    super(scope, id, { ...rest, project: typeof project === 'string' ? project : project.slug });
  }

  addTemplate(name: string, props: TemplateProps): Template {
    const t = new Template(this, name, { ...props, projectEnv: this.projectEnv, name });
    this.templatesByName.set(name, t);
    return t;
  }

  /**
   * A template added with addTemplate. Referencing it (rather than its name as a string) makes
   * Terraform create the template before the clients that use it.
   */
  template(name: string): Template {
    const t = this.templatesByName.get(name);
    if (!t)
      throw new Error(
        `no template "${name}" was added to ${this.node.path} (added: ${[...this.templatesByName.keys()].join(', ') || 'none'})`,
      );
    return t;
  }

  /**
   * A client of this environment, created in `scope`: the environment by default, or e.g. a team
   * construct (its construct id is then prefixed with this environment's: `production-globex`).
   */
  addClient(name: string, props: Omit<KmsClientConfig, 'environment' | 'name'>, scope: Construct = this): KmsClient {
    return new KmsClient(scope, this.childId(scope, name), { ...props, environment: this, name });
  }

  addEndpoint(method: string, path: string, props: EndpointProps = {}, scope: Construct = this): Endpoint {
    const { id, ...rest } = props;
    const constructId =
      id ?? this.childId(scope, `${method.toUpperCase()} ${path.split('/').filter(Boolean).join('.') || 'root'}`);
    return new Endpoint(scope, constructId, { ...rest, projectEnv: this.projectEnv, method, path });
  }

  private childId(scope: Construct, id: string): string {
    return scope === this ? id : `${this.node.id}-${id}`;
  }
}

/** A kms_project that adds its environments. */
export class KmsProject extends Project {
  addEnvironment(type: string, props: Omit<KmsEnvironmentConfig, 'project' | 'type'>): KmsEnvironment {
    return new KmsEnvironment(this, type, { ...props, project: this.slug, type });
  }
}

/**
 * A project defined elsewhere (another configuration, the dashboard): a `kms_project` data
 * source, so no kms_project resource is synthesized. kms-sync reads it as YAML's `external: true`
 * and Terraform as a lookup: neither creates, renames nor deletes the project, and only the
 * environments added here are in scope. The project must exist (Terraform's read, and kms-sync's
 * plan, stop when it does not).
 */
export class KmsExternalProject extends DataKmsProject {
  addEnvironment(type: string, props: Omit<KmsEnvironmentConfig, 'project' | 'type'>): KmsEnvironment {
    return new KmsEnvironment(this, type, { ...props, project: this.slug, type });
  }
}
