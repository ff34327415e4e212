#!/usr/bin/env bash
# Deploy signup verification to Google Cloud (docs/deploy.md walks through the first time).
#
#   ./deploy.sh          build the bundle, create/refresh the database, migrate, grant, apply all
#   ./deploy.sh --plan   build the bundle and show the Terraform plan; changes nothing
#
# Needs: gcloud (Application Default Credentials of a principal listed in `migrators`),
# terraform >= 1.11, python3 >= 3.11; TF_STATE_BUCKET (the state bucket) and
# infra/terraform.tfvars (or DEPLOY_VAR_FILE). Running it twice changes nothing the second time:
# the bundle is reproducible and named by its hash, migrations skip what is applied, grants and
# Terraform converge.
#
# Overridable: DEPLOY_BUILD_DIR (default: build/); VERIFY_PYTHON (python with the project
# installed; default: .venv via dev.py); VERIFYCTL (default: "$VERIFY_PYTHON -m
# signup_verification.cli"); MIGRATOR (database user for migrations; default: the gcloud account);
# DEPLOY_MIGRATE_ATTEMPTS (default 6) and DEPLOY_RETRY_DELAY (first wait in seconds, default 10,
# doubling up to 60): the migration's retries while the migrator's new IAM roles propagate.
#
# Phases (docs/deploy.md, "Order of operations"): 1. the database, every IAM grant, the secret
# containers and the log-based metrics, with their waits (time_sleep in infra/waits.tf); the secrets
# must then hold a value; 2. migrations and database grants; 3. everything else.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INFRA="$ROOT/infra"
BUILD="${DEPLOY_BUILD_DIR:-$ROOT/build}"
BUNDLE="$BUILD/function-source.zip"

die() {
  echo "deploy.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
}

PLAN_ONLY=false
for arg in "$@"; do
  case "$arg" in
    --plan) PLAN_ONLY=true ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $arg (try --help)" ;;
  esac
done

# ---- preflight: fail before touching anything ---------------------------------------------
require_tool() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed or not on PATH ($2)"
}
require_tool gcloud "https://cloud.google.com/sdk/docs/install"
require_tool terraform "Terraform >= 1.11: https://developer.hashicorp.com/terraform/install"
require_tool python3 "Python >= 3.11"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "python3 must be 3.11 or newer"

[[ -n "${TF_STATE_BUCKET:-}" ]] || die "TF_STATE_BUCKET is not set (the GCS bucket that keeps Terraform state; docs/deploy.md, step 2)"
VAR_FILE="${DEPLOY_VAR_FILE:-$INFRA/terraform.tfvars}"
[[ -f "$VAR_FILE" ]] || die "$VAR_FILE not found: copy infra/terraform.tfvars.example and fill it in"
VAR_FILE="$(cd "$(dirname "$VAR_FILE")" && pwd)/$(basename "$VAR_FILE")"
# The example's placeholders plan fine but fail when applied (no such principal or project).
if sed 's/#.*//' "$VAR_FILE" | grep -Eq '@example\.com|"my-signup-prod"'; then
  die "$VAR_FILE still holds example values (@example.com, my-signup-prod): replace them (docs/deploy.md, step 4)"
fi

gcloud auth application-default print-access-token >/dev/null 2>&1 \
  || die "no Application Default Credentials: run 'gcloud auth application-default login'"

if [[ -z "${VERIFY_PYTHON:-}" ]]; then
  python3 "$ROOT/dev.py" setup
  VERIFY_PYTHON="$ROOT/.venv/bin/python"
fi
read -r -a VERIFYCTL_CMD <<<"${VERIFYCTL:-$VERIFY_PYTHON -m signup_verification.cli}"

tf() {
  terraform -chdir="$INFRA" "$@"
}

# The items of a JSON list, or the values of a JSON object, one per line (terraform output -json).
json_items() {
  "$VERIFY_PYTHON" -c 'import json, sys
value = json.loads(sys.argv[1])
print("\n".join(value.values() if isinstance(value, dict) else value))' "$1"
}

# A command that may fail only until new IAM grants propagate: bounded retries, doubling waits.
retry_while_iam_propagates() {
  local what="$1" attempts="${DEPLOY_MIGRATE_ATTEMPTS:-6}" delay="${DEPLOY_RETRY_DELAY:-10}" attempt=1
  shift
  until "$@"; do
    if ((attempt >= attempts)); then
      die "$what failed $attempts times; if it is a permission error, check the migrator's roles (docs/deploy.md, recovery)"
    fi
    echo "==> $what failed (attempt $attempt of $attempts): new IAM roles may still be propagating; retrying in ${delay}s" >&2
    sleep "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2 > 60 ? 60 : delay * 2))
  done
}

# ---- 1. the bundle ------------------------------------------------------------------------
echo "==> building the function bundle"
"$VERIFY_PYTHON" "$ROOT/tools/build_bundle.py" --out "$BUNDLE"
TF_VARS=(-input=false "-var-file=$VAR_FILE" "-var=source_archive=$BUNDLE")

# ---- 2. terraform init --------------------------------------------------------------------
echo "==> terraform init"
tf init -input=false -backend-config="bucket=$TF_STATE_BUCKET" -backend-config="prefix=signup-verification"

if [[ "$PLAN_ONLY" == true ]]; then
  echo "==> terraform plan (--plan: nothing is applied)"
  tf plan "${TF_VARS[@]}" -out="$BUILD/tfplan"
  exit 0
fi

# ---- 3. the database first: migrations run before new code is deployed ---------------------
# On the first deploy the instance does not exist yet; afterwards this plan is empty. The same
# phase makes every IAM grant, the secret containers and the log-based metrics, and waits for them
# (infra/waits.tf) while Cloud SQL is being created, so that the last phase finds them usable.
echo "==> database, IAM grants, secret containers and log-based metrics"
tf plan "${TF_VARS[@]}" -out="$BUILD/database.tfplan" \
  -target=google_sql_database.main -target=google_sql_user.function -target=google_sql_user.migrator \
  -target=google_project_iam_member.migrator -target=google_secret_manager_secret.secret \
  -target=time_sleep.iam_grants -target=time_sleep.metrics
tf apply -input=false "$BUILD/database.tfplan"

# The functions start with their secrets injected: a secret without a value fails the deploy.
PROJECT="$(tf output -raw project_id)"
SECRETS_JSON="$(tf output -json secrets)"
SECRET_IDS="$(json_items "$SECRETS_JSON")"
MISSING=()
while read -r secret; do
  [[ -z "$secret" ]] && continue
  version="$(gcloud secrets versions list "$secret" --project="$PROJECT" --filter=state:ENABLED --limit=1 --format='value(name)')"
  [[ -n "$version" ]] || MISSING+=("$secret")
done <<<"$SECRET_IDS"
if ((${#MISSING[@]})); then
  die "secret(s) without an enabled version: ${MISSING[*]}; add the values (docs/deploy.md, step 5), then run ./deploy.sh again"
fi

INSTANCE_CONNECTION_NAME="$(tf output -raw instance_connection_name)"
DB_NAME="$(tf output -raw database_name)"
MIGRATOR="${MIGRATOR:-$(gcloud config get-value account 2>/dev/null)}"
[[ -n "$MIGRATOR" ]] || die "no migrator identity: set MIGRATOR or run 'gcloud auth login'"
export INSTANCE_CONNECTION_NAME DB_NAME
export DB_USER="$MIGRATOR" ENVIRONMENT=production

echo "==> migrations on $INSTANCE_CONNECTION_NAME as $DB_USER"
retry_while_iam_propagates "migrations" "${VERIFYCTL_CMD[@]}" migrate

echo "==> database privileges of the functions"
WRITERS_JSON="$(tf output -json database_writers)"
READERS_JSON="$(tf output -json database_readers)"
GRANT_ARGS="$("$VERIFY_PYTHON" -c 'import json, sys
writers, readers = (json.loads(arg) for arg in sys.argv[1:])
print("\n".join(["--writer=" + u for u in writers] + ["--reader=" + u for u in readers]))' \
  "$WRITERS_JSON" "$READERS_JSON")"
mapfile -t GRANTS <<<"$GRANT_ARGS"
"${VERIFYCTL_CMD[@]}" grant "${GRANTS[@]}"

# ---- 4. everything else -------------------------------------------------------------------
echo "==> terraform plan and apply"
tf plan "${TF_VARS[@]}" -out="$BUILD/tfplan"
tf apply -input=false "$BUILD/tfplan"

# confirm_public_access = "invoker_iam_check_disabled": public without an allUsers binding (Domain
# Restricted Sharing). The Cloud Functions API has no field for it, so it is set on the function's
# Cloud Run service, again on every deploy in case a function update reset it.
REGION="$(tf output -raw region)"
UNCHECKED_JSON="$(tf output -json services_without_invoker_iam_check)"
UNCHECKED="$(json_items "$UNCHECKED_JSON")"
while read -r service; do
  [[ -z "$service" ]] && continue
  echo "==> turning off the Cloud Run invoker IAM check of $service (public page)"
  gcloud run services update "$service" --project="$PROJECT" --region="$REGION" --no-invoker-iam-check --quiet
done <<<"$UNCHECKED"

echo "==> done. Endpoints:"
tf output function_urls
