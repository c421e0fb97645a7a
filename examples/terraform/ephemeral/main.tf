# A key handed to another provider without ever being written to a plan or state (Terraform
# >= 1.11, OpenTofu >= 1.11): kms_key issues it into kms-sync's store, the ephemeral resource
# kms_key_secret reads it back at plan and apply time, and a write-only argument of the consumer
# (consumers.tf.example: AWS Secrets Manager, Vault, Kubernetes) receives it. The project key
# comes from an ephemeral variable, so it stays out of the saved plan too:
#   TF_VAR_kms_api_key=sk_live_… terraform apply
terraform {
  required_version = ">= 1.11"
  required_providers {
    kms = {
      source  = "kms-sync/kms"
      version = "0.1.0"
    }
  }
}

variable "kms_api_key" {
  type      = string
  ephemeral = true
  sensitive = true
}

provider "kms" {
  api_key = var.kms_api_key # url: KMS_API_URL
}

resource "kms_project" "acme" {
  slug = "acme"
  name = "Acme"
}

resource "kms_environment" "production" {
  project = kms_project.acme.slug
  type    = "production"
  url     = "https://api.acme.example"
}

resource "kms_template" "gold" {
  project_env    = kms_environment.production.project_env
  name           = "gold"
  rate_limit_day = 10000
}

resource "kms_client" "globex" {
  project_env = kms_environment.production.project_env
  name        = "globex"
  template    = kms_template.gold.name
}

resource "kms_key" "globex_primary" {
  project_env = kms_client.globex.project_env
  client      = kms_client.globex.name
  name        = "primary"
  ttl         = "90d"
}

# key_id is known only once the key exists: Terraform opens the secret from then on (at apply,
# and at every later plan), and checks it holds this very key, live in the service. The store and
# secret name follow the kms_key's, wherever it writes.
ephemeral "kms_key_secret" "globex_primary" {
  key_id       = kms_key.globex_primary.key_id
  project_env  = kms_key.globex_primary.project_env
  client       = kms_key.globex_primary.client
  name         = kms_key.globex_primary.name
  secret_store = kms_key.globex_primary.secret_store
  secret_name  = kms_key.globex_primary.secret_name
}

locals {
  # Bump with each new key (a rotation): write-only arguments are never compared, so the
  # consumer rewrites its copy when this version changes.
  globex_key_version = 1
}
