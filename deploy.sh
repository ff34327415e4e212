#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Deploy signup verification to Google Cloud in one run, on an empty project (docs/deploy.md).
#
#   ./deploy.sh                  preflights, then everything: state bucket, database, secrets,
#                                image, migrations, functions. Safe to interrupt and run again.
#   ./deploy.sh --check          every preflight, the Terraform plan and its cost; changes nothing (--plan too)
#   --secret-file SETTING=PATH   a secret's value from a file (repeatable), e.g. TWILIO_AUTH_TOKEN=t.txt
#   --var-file PATH              the variables (default: DEPLOY_VAR_FILE, else infra/terraform.tfvars)
#
# Secret values are taken up front: --secret-file, DEPLOY_SECRET_<SETTING> (e.g.
# DEPLOY_SECRET_SENDGRID_API_KEY), a generated TOKEN_KEYS, or a hidden prompt in a terminal.
# Environment: TF_STATE_BUCKET (default PROJECT-tfstate; created when missing), DEPLOY_BUILD_DIR
# (default build/), DEPLOY_POLL_SECONDS (image build polling, default 10), DEPLOY_SKIP_CHECKS (e.g. "quota": those
# preflights' failures become notes).
#
# Order (docs/deploy.md, "Order of operations"): 1. the APIs and the service agents; Cloud SQL,
# identities, grants, secret containers, log-based metrics, the bundle and its registry, with their
# waits; then the secret versions and the image; 2. the migration and grant jobs, run; 3. everything
# else. Every step converges, so a second run changes nothing and an interrupted run picks up where
# it stopped.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INFRA="$ROOT/infra"
BUILD="${DEPLOY_BUILD_DIR:-$ROOT/build}"
BUNDLE="$BUILD/function-source.zip"
PY=python3
((BASH_VERSINFO[0] >= 4)) || {
  echo "deploy.sh: bash 4 or newer is needed (macOS: brew install bash)" >&2
  exit 1
}
# shellcheck source=infra/deploy/common.sh
source "$INFRA/deploy/common.sh"
# shellcheck source=infra/deploy/preflight.sh
source "$INFRA/deploy/preflight.sh"
# shellcheck source=infra/deploy/secrets.sh
source "$INFRA/deploy/secrets.sh"
# shellcheck source=infra/deploy/image.sh
source "$INFRA/deploy/image.sh"
# shellcheck source=infra/deploy/agents.sh
source "$INFRA/deploy/agents.sh"

CHECK=false
VAR_FILE="${DEPLOY_VAR_FILE:-$INFRA/terraform.tfvars}"
while (($#)); do
  case "$1" in
    --check | --plan) CHECK=true ;;
    --secret-file) (($# >= 2)) || die "--secret-file needs SETTING=PATH"; add_secret_file "$2"; shift ;;
    --secret-file=*) add_secret_file "${1#*=}" ;;
    --var-file) (($# >= 2)) || die "--var-file needs a path"; VAR_FILE="$2"; shift ;;
    --var-file=*) VAR_FILE="${1#*=}" ;;
    -h | --help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
  shift
done

# ---- preflight: local, then the project; nothing has changed yet ----------------------------
check_tools
report_failures
[[ -f "$VAR_FILE" ]] && VAR_FILE="$(cd "$(dirname "$VAR_FILE")" && pwd)/$(basename "$VAR_FILE")"
PROJECT="" REGION="" PUBLIC_ACCESS="" DB_CONNECTIVITY="" PUBLIC_IP_FORBIDDEN=false
if [[ -f "$VAR_FILE" ]]; then
  PROJECT="$(var_setting project_id)"
  REGION="$(var_setting region)"
  PUBLIC_ACCESS="$(var_setting public_access)"
  DB_CONNECTIVITY="$(var_setting db_connectivity)"
fi
REGION="${REGION:-europe-west1}"
PUBLIC_ACCESS="${PUBLIC_ACCESS:-invoker_iam_disabled}"
check_var_file
check_auth
report_failures

if [[ "$CHECK" == false ]]; then
  # What Terraform and the checks below call first (Terraform enables the rest, infra/apis.tf).
  step "enabling the APIs the checks and Terraform start with"
  gcloud services enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com \
    cloudbilling.googleapis.com orgpolicy.googleapis.com cloudquotas.googleapis.com \
    --project="$PROJECT" >/dev/null || die "could not enable the first APIs on $PROJECT: is billing linked, and are you Owner?"
fi
check_project
report_failures
check_org_policies
check_migration_path
check_signup_site
report_failures

# ---- the bundle, and Terraform's state -------------------------------------------------------
# Python's standard library is all this machine needs (-I -S: no site-packages, no environment):
# nothing is installed to build the zip or to make a token key.
step "building the function bundle"
mkdir -p "$BUILD"
BUNDLE_SHA="$("$PY" -I -S "$ROOT/tools/build_bundle.py" --out "$BUNDLE" | awk '{print $2}')"
[[ -n "$BUNDLE_SHA" ]] || die "tools/build_bundle.py printed no hash"
TF_VARS=(-input=false "-var-file=$VAR_FILE" "-var=source_archive=$BUNDLE")
STATE_BUCKET="${TF_STATE_BUCKET:-$PROJECT-tfstate}"
TF_DIR="$INFRA"

if gcloud storage buckets describe "gs://$STATE_BUCKET" --format='value(name)' >/dev/null 2>&1; then
  step "terraform init (state: gs://$STATE_BUCKET)"
  tf init -input=false -backend-config="bucket=$STATE_BUCKET" -backend-config="prefix=signup-verification" >/dev/null \
    || die "terraform init failed (the error is above): can $ACCOUNT read gs://$STATE_BUCKET?"
elif [[ "$CHECK" == true ]]; then
  # No state yet: nothing exists, so a plan from empty state, in a copy, is the true plan.
  TF_DIR="$BUILD/check-infra"
  rm -rf "$TF_DIR" && mkdir -p "$TF_DIR" && cp "$INFRA"/*.tf "$TF_DIR"/
  printf 'terraform {\n  backend "local" {}\n}\n' >"$TF_DIR/check_override.tf"
  note "state bucket gs://$STATE_BUCKET does not exist yet (./deploy.sh creates it): planning from empty state"
  tf init -input=false >/dev/null || die "terraform init failed (the error is above)"
else
  # Versioned, private, in the region. Only the deployer reaches it: the build account has no
  # project-wide storage role (docs/deploy.md, "State").
  step "creating the state bucket gs://$STATE_BUCKET"
  gcloud storage buckets create "gs://$STATE_BUCKET" --project="$PROJECT" --location="$REGION" \
    --uniform-bucket-level-access --public-access-prevention >/dev/null \
    || die "could not create gs://$STATE_BUCKET: set TF_STATE_BUCKET to a bucket you own"
  gcloud storage buckets update "gs://$STATE_BUCKET" --versioning >/dev/null
  tf init -input=false -backend-config="bucket=$STATE_BUCKET" -backend-config="prefix=signup-verification" >/dev/null \
    || die "terraform init failed (the error is above)"
fi

choose_db_connectivity

# ---- the whole plan, and the checks that need it ---------------------------------------------
step "terraform plan (everything this run would change)"
tf_plan "$BUILD/tfplan"
WHOLE_PLAN_CHANGES="$PLAN_CHANGES"
REQUIRED_SECRETS="$(plan_output "$BUILD/tfplan" required_secrets)"
SERVICE_AGENTS="$(plan_output "$BUILD/tfplan" service_agents)"
collect_secrets "$REQUIRED_SECRETS" "$([[ "$CHECK" == true ]] && echo check || echo run)"
check_quotas "$(plan_output "$BUILD/tfplan" run_capacity)"
report_failures
show_cost "$BUILD/tfplan"

if [[ "$CHECK" == true ]]; then
  echo "deploy.sh --check: every preflight passed; the plan is above; nothing was changed"
  exit 0
fi

# ---- 1. the database and everything the image, the jobs and the functions stand on ----------
PHASE1=(
  -target=google_sql_database.main -target=google_sql_user.function -target=google_sql_user.migrator
  -target=google_secret_manager_secret.secret -target=google_secret_manager_secret_iam_member.function
  -target=google_storage_bucket_object.source -target=google_storage_bucket_iam_member.build_reads_source
  -target=google_artifact_registry_repository_iam_member.build_push -target=google_project_iam_member.build_logs
  -target=google_project_iam_member.database_client -target=time_sleep.iam_grants -target=time_sleep.metrics
)
if [[ "$WHOLE_PLAN_CHANGES" == true ]]; then
  # The APIs and the wait for them first, then the agents of the services the rest relies on.
  step "1. APIs (and the wait until they answer), the service agents"
  tf_plan "$BUILD/apis.tfplan" -target=time_sleep.apis
  if [[ "$PLAN_CHANGES" == true ]]; then tf apply -input=false "$BUILD/apis.tfplan" || apply_failed "phase 1 (APIs)"; fi
  ensure_service_agents "$SERVICE_AGENTS"
  step "1. database, identities, grants, secret containers, metrics, bundle (first run: ~15 min)"
  tf_plan "$BUILD/phase1.tfplan" "${PHASE1[@]}"
  if [[ "$PLAN_CHANGES" == true ]]; then tf apply -input=false "$BUILD/phase1.tfplan" || apply_failed "phase 1"; fi
fi
add_secret_versions
ensure_image "$(tf output -json build)" "$(tf output -raw image)"

# ---- 2. migrations and database grants, inside Google Cloud, before new code ------------------
if [[ "$WHOLE_PLAN_CHANGES" == true ]]; then
  step "2. the migration and grant jobs"
  tf_plan "$BUILD/phase2.tfplan" -target=google_cloud_run_v2_job.schema
  if [[ "$PLAN_CHANGES" == true ]]; then tf apply -input=false "$BUILD/phase2.tfplan" || apply_failed "phase 2"; fi
  run_schema_jobs "$(tf output -json schema_jobs)"

  # ---- 3. everything else ------------------------------------------------------------------
  step "3. functions, invokers, scheduler jobs, alerts, dashboard"
  tf_plan "$BUILD/tfplan"
  if [[ "$PLAN_CHANGES" == true ]]; then tf apply -input=false "$BUILD/tfplan" || apply_failed "phase 3"; fi
else
  step "nothing to change: the plan is empty, every secret has a value, the image exists"
fi

echo "==> done. Endpoints:"
tf output function_urls
