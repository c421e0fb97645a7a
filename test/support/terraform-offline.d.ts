// Types of terraform-offline.js (plain JavaScript: the bench runs it with plain node).
export declare const PROVIDER_VERSION: string;
export declare function onPath(bin: 'terraform' | 'tofu'): string | undefined;
export declare function findTerraform(): string | undefined;
export declare function mirrorProvider(
  mirror: string,
  p: { namespace: string; type: string; version: string },
  script: string,
): void;
export declare function offlineTerraformEnv(o: {
  root: string;
  providerBin: string;
  service: { url: string; apiKey: string };
  ageKeyFile?: string;
  extra?: Record<string, string>;
}): Record<string, string | undefined>;
export declare const HCL_REQUIRED_PROVIDER: string;
export declare function hclProjectEnvironment(o: { slug: string; name: string; type: string; url: string }): string;
