# Data sources: read-only views of objects that exist, by their natural ids (another
# configuration's, or made by hand). None of them holds a raw key: kms_client lists its keys by
# id, expiry and dates; the raw value is the ephemeral resource kms_key_secret's
# (examples/terraform/ephemeral).
terraform {
  required_providers {
    kms = {
      source  = "kms-sync/kms"
      version = "0.1.0"
    }
  }
}

data "kms_project" "acme" {
  slug = "acme"
}

data "kms_environment" "production" {
  project_env = "acme-production"
}

data "kms_template" "gold" {
  project_env = "acme-production"
  name        = "gold"
}

data "kms_client" "globex" {
  project_env = "acme-production"
  name        = "globex"
}

data "kms_endpoint" "list_orders" {
  project_env = "acme-production"
  method      = "GET"
  path        = "/v1/orders"
}

data "kms_key" "globex_primary" {
  project_env = "acme-production"
  client      = "globex"
  name        = "primary"
}

# Lists of what an environment holds.
data "kms_projects" "all" {
  # every project the key can see
}

data "kms_templates" "production" {
  project_env = "acme-production"
}

data "kms_clients" "gold" {
  project_env = "acme-production"
  template    = "gold"
}

data "kms_endpoints" "production" {
  project_env = "acme-production"
}

output "gold_client_names" {
  value = [for c in data.kms_clients.gold.clients : c.name]
}

output "globex_key_ids" {
  value = [for k in data.kms_client.globex.keys : k.key_id]
}
