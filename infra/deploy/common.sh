# shellcheck shell=bash
# Shared by deploy.sh and its parts (sourced): messages, the failed-check list, JSON, and terraform
# run with gcloud's own access token.

die() {
  echo "deploy.sh: $*" >&2
  exit 1
}

step() {
  echo "==> $*"
}

note() {
  echo "deploy.sh: note: $*" >&2
}

# A preflight that fails adds one line naming the fix; report_failures prints them all and stops.
# Each line starts with its check's name ("quota: ..."); DEPLOY_SKIP_CHECKS="quota org policy"
# turns the named checks' failures into notes, for a check that is wrong about a project.
FAILURES=()
fail_check() {
  local kind="${1%%:*}"
  if [[ " ${DEPLOY_SKIP_CHECKS:-} " == *" $kind "* || ",${DEPLOY_SKIP_CHECKS:-}," == *",$kind,"* ]]; then
    note "skipped by DEPLOY_SKIP_CHECKS: $1"
    return
  fi
  FAILURES+=("$1")
}

report_failures() {
  if ((${#FAILURES[@]})); then
    printf 'deploy.sh: check failed: %s\n' "${FAILURES[@]}" >&2
    exit 1
  fi
}

# json_value JSON PATH: the value at a dotted PATH ("a.b.c") of a JSON document; objects and
# lists come out as JSON, strings as they are, a missing key as nothing.
json_value() {
  "$PY" -c 'import json, sys
value = json.loads(sys.argv[1] or "null")
for key in filter(None, sys.argv[2].split(".")):
    value = value.get(key) if isinstance(value, dict) else None
if value is not None:
    print(value if isinstance(value, str) else json.dumps(value))' "$1" "$2"
}

# json_pairs JSON: the entries of a JSON object as "key<TAB>value" lines.
json_pairs() {
  "$PY" -c 'import json, sys
for key, value in (json.loads(sys.argv[1] or "{}") or {}).items():
    print(f"{key}\t{value if isinstance(value, str) else json.dumps(value)}")' "$1"
}

# A string setting of the var file (`name = "value"` at the top level; comments ignored).
var_setting() {
  "$PY" -c 'import re, sys
for line in open(sys.argv[1], encoding="utf-8"):
    match = re.match(r"\s*" + re.escape(sys.argv[2]) + r"\s*=\s*\"([^\"]*)\"", line)
    if match:
        print(match.group(1))
        break' "$VAR_FILE" "$1"
}

# terraform in $TF_DIR, authenticated as gcloud's own account: the provider and the state
# backend take GOOGLE_OAUTH_ACCESS_TOKEN, so Terraform and every gcloud call act as one principal
# and Application Default Credentials play no part. A fresh token per command (they last 1 h).
tf() {
  local token
  token="$(gcloud auth print-access-token 2>/dev/null)" || die "gcloud could not mint an access token: run 'gcloud auth login'"
  env -u GOOGLE_APPLICATION_CREDENTIALS -u GOOGLE_CREDENTIALS GOOGLE_OAUTH_ACCESS_TOKEN="$token" \
    terraform -chdir="$TF_DIR" "$@"
}

# tf_plan OUT [ARGS]: plan into OUT; sets PLAN_CHANGES to true or false (-detailed-exitcode).
tf_plan() {
  local out="$1" rc=0
  shift
  tf plan "${TF_VARS[@]}" -detailed-exitcode -out="$out" "$@" || rc=$?
  case "$rc" in
    0) PLAN_CHANGES=false ;;
    2) PLAN_CHANGES=true ;;
    *) die "terraform plan failed (exit $rc): its error is above" ;;
  esac
}

apply_failed() {
  die "terraform apply failed in $1 (the error is above): fix its cause and run ./deploy.sh again; every step resumes where it stopped"
}

# plan_output PLAN NAME: an output's planned value (outputs that depend on no resource are known).
plan_output() {
  local shown
  shown="$(tf show -json "$1")" || die "terraform show of $1 failed"
  json_value "$shown" "planned_values.outputs.$2.value"
}

# show_cost PLAN: what the plan costs a month idle and per 1,000 verifications, at the list prices of
# tools/plan_prices.py (tools/plan_cost.py reads the plan: the tier's database, instances, jobs, pages).
show_cost() {
  step "the plan's cost at list prices (tools/plan_cost.py)"
  tf show -json "$1" >"$1.json" || die "terraform show of $1 failed"
  "$PY" -I -S "$ROOT/tools/plan_cost.py" --plan-json "$1.json" || note "tools/plan_cost.py could not price this plan (above)"
}
