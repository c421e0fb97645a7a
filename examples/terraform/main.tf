# kms-sync's Terraform provider: the Acme API's production environment, one template, one
# client with a rotating key, one endpoint. The service URL and project key come from
# KMS_API_URL and KMS_API_KEY; the raw key goes to the secret store, never into the state.
terraform {
  required_providers {
    kms = {
      source  = "kms-sync/kms"
      version = "0.1.0"
    }
  }
}

provider "kms" {
  # url     = "https://kms.example.com/api/v1" # default: KMS_API_URL
  # api_key = var.kms_api_key                  # default: KMS_API_KEY (keep it out of code)

  # Where raw keys go. Without a block: an age-encrypted SOPS file in .kms-sync/ beside this
  # configuration. Any store kms-sync supports works (vault://, aws-sm://, gcp-sm://, ...).
  secret_store {
    name    = "local"
    uri     = "sops:.kms-sync/secrets.sops.yaml"
    default = true
  }
}

resource "kms_project" "acme" {
  slug        = "acme"
  name        = "Acme"
  description = "The Acme API"
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
  max_clients    = 50
}

resource "kms_client" "globex" {
  project_env  = kms_environment.production.project_env
  name         = "globex"
  template     = kms_template.gold.name
  ip_whitelist = ["10.0.0.0/8"]
  metadata = {
    team = "payments"
  }
}

resource "kms_key" "globex_primary" {
  project_env  = kms_client.globex.project_env
  client       = kms_client.globex.name
  name         = "primary"
  ttl          = "90d"
  auto_rotate  = true
  secret_store = "local"

  # Rotation is a replacement: issue and store the new key before the old one goes (which then
  # stays valid until it expires, or for rotation_overlap).
  lifecycle {
    create_before_destroy = true
  }
}

resource "kms_endpoint" "list_orders" {
  project_env = kms_environment.production.project_env
  method      = "GET"
  path        = "/v1/orders"
  name        = "List orders"
  request = {
    query = { status = "string" }
  }
}

output "globex_key" {
  description = "Where the key is and what it looks like; never the key itself."
  value = {
    id          = kms_key.globex_primary.key_id
    prefix      = kms_key.globex_primary.key_prefix
    expires_at  = kms_key.globex_primary.expires_at
    secret_name = kms_key.globex_primary.secret_name
  }
}
