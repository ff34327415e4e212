# shellcheck shell=bash
# The Google-managed service agents (sourced by deploy.sh). Enabling an API usually creates its
# agent, but not always in time, nor for every API: Cloud Run's pulls the image, Cloud Build's runs
# the build, Cloud Scheduler's and Cloud Tasks' mint the OIDC tokens of the ticks and the fan-out,
# Service Networking's makes the private IP's peering. Each is created explicitly, once its API is
# on and before anything uses it (the Terraform resource for this, google_project_service_identity,
# exists only in the google-beta provider). Idempotent: an agent that exists is returned as it is.

# ensure_service_agents JSON: the APIs (Terraform's service_agents output) whose agents to create.
ensure_service_agents() {
  local service email
  while read -r service; do
    [[ -z "$service" ]] && continue
    email="$(CLOUDSDK_CORE_DISABLE_PROMPTS=1 gcloud beta services identity create --service="$service" \
      --project="$PROJECT" --format='value(email)')" \
      || die "could not create the service agent of $service (gcloud beta services identity create --service=$service --project=$PROJECT): its error is above; run ./deploy.sh again"
    note "service agent of $service: ${email:-created}"
  done < <("$PY" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1] or "[]")))' "$1")
}
