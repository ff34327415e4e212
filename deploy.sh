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
# signup_verification.cli"); MIGRATOR (database user for migrations; default: the gcloud account).
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
# On the first deploy the instance does not exist yet; afterwards this plan is empty.
echo "==> database, its IAM users and their identities"
tf plan "${TF_VARS[@]}" -out="$BUILD/database.tfplan" \
  -target=google_sql_database.main -target=google_sql_user.function -target=google_sql_user.migrator \
  -target=google_project_iam_member.migrator
tf apply -input=false "$BUILD/database.tfplan"

INSTANCE_CONNECTION_NAME="$(tf output -raw instance_connection_name)"
DB_NAME="$(tf output -raw database_name)"
MIGRATOR="${MIGRATOR:-$(gcloud config get-value account 2>/dev/null)}"
[[ -n "$MIGRATOR" ]] || die "no migrator identity: set MIGRATOR or run 'gcloud auth login'"
export INSTANCE_CONNECTION_NAME DB_NAME
export DB_USER="$MIGRATOR" ENVIRONMENT=production

echo "==> migrations on $INSTANCE_CONNECTION_NAME as $DB_USER"
"${VERIFYCTL_CMD[@]}" migrate

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

echo "==> done. Endpoints:"
tf output function_urls
