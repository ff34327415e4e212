# shellcheck shell=bash
# deploy.sh's preflights (sourced). Each check that fails adds one line naming the fix
# (fail_check); what cannot be checked from here is a note, not a failure. None changes anything.

check_tools() {
  if ! command -v gcloud >/dev/null 2>&1; then
    fail_check "tools: gcloud is not installed or not on PATH: https://cloud.google.com/sdk/docs/install"
  elif ! CLOUDSDK_CORE_DISABLE_PROMPTS=1 gcloud beta services identity create --help >/dev/null 2>&1; then
    # The service agents are created with it (ensure_service_agents): no GA command or resource does.
    fail_check "tools: gcloud has no beta commands (gcloud beta services identity create): gcloud components install beta"
  fi
  if ! command -v terraform >/dev/null 2>&1; then
    fail_check "tools: terraform is not installed or not on PATH: Terraform >= 1.11 from https://developer.hashicorp.com/terraform/install"
  else
    local version
    version="$(terraform version -json 2>/dev/null | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["terraform_version"])' 2>/dev/null)"
    if ! "$PY" -c 'import sys; sys.exit(tuple(int(p) for p in sys.argv[1].split(".")[:2]) < (1, 11))' "${version:-0.0}" 2>/dev/null; then
      fail_check "tools: terraform ${version:-of unknown version} is older than 1.11 (write-only arguments): install Terraform >= 1.11"
    fi
  fi
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    fail_check "tools: python3 must be 3.11 or newer (tools/build_bundle.py reads pyproject.toml with tomllib)"
  fi
}

# What the example marks EXAMPLE: plans fine, fails (or sends from a domain nobody owns) when applied.
PLACEHOLDERS='@example\.com|"my-signup-prod"|AC0{32}|HX0{31}[01]|\+14155550100'

# placeholder_defaults: "name (default)" for each variable of infra/*.tf that the var file does not
# set and whose default holds a placeholder (the default expression only, never its description).
placeholder_defaults() {
  "$PY" - "$VAR_FILE" "$INFRA" "$PLACEHOLDERS" <<'PY'
import pathlib, re, sys
var_file, infra, pattern = sys.argv[1], pathlib.Path(sys.argv[2]), re.compile(sys.argv[3])
text = re.sub(r"#.*", "", pathlib.Path(var_file).read_text(encoding="utf-8"))
assigned = set(re.findall(r"^\s*([a-z_][a-z0-9_]*)\s*=", text, re.M))
found = []
for path in sorted(infra.glob("*.tf")):
    for name, body in re.findall(r'^variable "(\w+)" \{\n(.*?)^\}', path.read_text(encoding="utf-8"), re.M | re.S):
        default = re.search(r"^  default\s*=\s*(.*)$", body, re.M)
        if name in assigned or not default:
            continue
        lines, depth = [], 0
        for line in body[default.start(1):].splitlines():  # until its brackets balance
            lines.append(line)
            depth += sum(line.count(c) for c in "{[(") - sum(line.count(c) for c in "}])")
            if depth <= 0:
                break
        if pattern.search(" ".join(lines)):
            found.append(f"{name} ({' '.join(lines).strip()})")
print(" ".join(found))
PY
}

check_var_file() {
  if [[ ! -f "$VAR_FILE" ]]; then
    fail_check "variables: $VAR_FILE not found: copy infra/terraform.tfvars.example to it and fill it in (docs/deploy.md, step 2)"
    return
  fi
  # The example's placeholders plan fine but fail when applied (no such project or principal).
  local found
  found="$(sed 's/#.*//' "$VAR_FILE" | grep -Eo "$PLACEHOLDERS" | sort -u | tr '\n' ' ' || true)"
  if [[ -n "$found" ]]; then
    fail_check "variables: $VAR_FILE still holds example values (${found% }): replace them (docs/deploy.md, step 2)"
  fi
  # The same placeholders as the defaults of variables the file leaves unset (email_from's sender).
  found="$(placeholder_defaults)"
  if [[ -n "$found" ]]; then
    fail_check "variables: $VAR_FILE leaves ${found% } at a default of infra/ that is an example value: set each in $VAR_FILE (docs/deploy.md, step 2)"
  fi
  if [[ -z "$PROJECT" ]]; then
    fail_check "variables: $VAR_FILE sets no project_id: add project_id = \"your-project\""
  fi
}

check_auth() {
  ACCOUNT="$(gcloud config get-value account 2>/dev/null || true)"
  if [[ -z "$ACCOUNT" ]] || ! gcloud auth print-access-token >/dev/null 2>&1; then
    fail_check "auth: gcloud has no usable account: run 'gcloud auth login' (Terraform runs with gcloud's own token, so no Application Default Credentials are needed)"
  fi
  # A second identity cannot creep in: tf() hands Terraform gcloud's token and unsets these.
  if [[ -n "${GOOGLE_APPLICATION_CREDENTIALS:-}${GOOGLE_CREDENTIALS:-}" ]]; then
    note "GOOGLE_APPLICATION_CREDENTIALS/GOOGLE_CREDENTIALS are ignored: every step runs as $ACCOUNT"
  fi
}

check_project() {
  if ! gcloud projects describe "$PROJECT" --format='value(projectNumber)' >/dev/null 2>&1; then
    fail_check "project: $PROJECT does not exist or $ACCOUNT cannot see it: check project_id in $VAR_FILE, or ask for Owner on it (docs/deploy.md, step 1)"
    return
  fi
  local billing
  if billing="$(gcloud billing projects describe "$PROJECT" --format='value(billingEnabled)' 2>/dev/null)"; then
    if [[ "${billing,,}" != "true" ]]; then
      fail_check "project: billing is not enabled on $PROJECT: gcloud billing projects link $PROJECT --billing-account=ACCOUNT_ID"
    fi
  else
    note "billing of $PROJECT not checked (the Cloud Billing API did not answer)"
  fi
}

# policy_state CONSTRAINT: "enforced", "open", "allow:V1 V2" (a list's allowed values), or
# "unknown" (not readable from here); the effective policy on the project.
policy_state() {
  local json
  if ! json="$(gcloud org-policies describe "$1" --project="$PROJECT" --effective --format=json 2>/dev/null)"; then
    echo unknown
    return
  fi
  "$PY" -c 'import json, sys
rules = ((json.loads(sys.argv[1] or "{}") or {}).get("spec") or {}).get("rules") or []
rules = [r for r in rules if not r.get("condition")]  # tag-conditional rules: not decidable here
allowed = [v for r in rules for v in (r.get("values") or {}).get("allowedValues", [])]
if any(str(r.get("enforce")).lower() == "true" or r.get("denyAll") for r in rules):
    print("enforced")
elif allowed and not any(r.get("allowAll") for r in rules):
    print("allow:" + " ".join(allowed))
else:
    print("open")' "$json"
}

check_org_policies() {
  local state unknown=()
  if [[ "$PUBLIC_ACCESS" == "allUsers" ]]; then
    state="$(policy_state iam.allowedPolicyMemberDomains)"
    [[ "$state" == unknown ]] && unknown+=(iam.allowedPolicyMemberDomains)
    if [[ "$state" == enforced || "$state" == allow:* ]]; then
      fail_check "org policy: iam.allowedPolicyMemberDomains (Domain Restricted Sharing) refuses allUsers: remove public_access = \"allUsers\" from $VAR_FILE (the default binds no allUsers member)"
    fi
  else
    state="$(policy_state run.managed.requireInvokerIam)"
    [[ "$state" == unknown ]] && unknown+=(run.managed.requireInvokerIam)
    if [[ "$state" == enforced ]]; then
      fail_check "org policy: run.managed.requireInvokerIam keeps the invoker check on the public confirm and reports services: ask an org policy admin for an exception on $PROJECT, or set public_access = \"allUsers\" where Domain Restricted Sharing is off"
    fi
  fi
  state="$(policy_state sql.restrictPublicIp)"
  [[ "$state" == unknown ]] && unknown+=(sql.restrictPublicIp)
  if [[ "$state" == enforced ]]; then
    PUBLIC_IP_FORBIDDEN=true
    if [[ "$DB_CONNECTIVITY" == public_ip ]]; then
      fail_check "org policy: sql.restrictPublicIp forbids the instance's connector-only public IP: remove db_connectivity = \"public_ip\" from $VAR_FILE (deploy.sh then deploys \"private_ip\"), or ask for an exception on $PROJECT"
    fi
  fi
  state="$(policy_state run.allowedIngress)"
  [[ "$state" == unknown ]] && unknown+=(run.allowedIngress)
  if [[ "$state" == enforced || ("$state" == allow:* && " ${state#allow:} " != *" all "*) ]]; then
    fail_check "org policy: run.allowedIngress forbids ingress \"all\", which confirm, reports, create and status need: ask for an exception on $PROJECT"
  fi
  state="$(policy_state gcp.resourceLocations)"
  [[ "$state" == unknown ]] && unknown+=(gcp.resourceLocations)
  if [[ "$state" == allow:* ]] && ! "$PY" -c 'import sys
region, allowed = sys.argv[1], sys.argv[2].split()
# Value groups (in:eu-locations, ...) cannot be expanded here: any group counts as allowing.
sys.exit(not any(v == region or v.startswith("in:") for v in allowed))' "$REGION" "${state#allow:}"; then
    fail_check "org policy: gcp.resourceLocations does not allow $REGION: set region in $VAR_FILE to an allowed region"
  fi
  if ((${#unknown[@]})); then
    note "organisation policies not readable from here, not checked: ${unknown[*]}"
  fi
}

# Migrations run inside Google Cloud (a Cloud Run job of the image Cloud Build makes), so this
# machine needs no route to Cloud SQL (port 3307). What that path needs: Cloud Build's default pool.
check_migration_path() {
  local state
  state="$(policy_state cloudbuild.allowedWorkerPools)"
  if [[ "$state" == enforced || "$state" == allow:* ]]; then
    fail_check "migrations: cloudbuild.allowedWorkerPools forbids Cloud Build's default pool, which builds the image the migration job runs: ask for an exception on $PROJECT"
  elif [[ "$state" == unknown ]]; then
    note "organisation policy cloudbuild.allowedWorkerPools not readable from here, not checked"
  fi
}

check_signup_site() {
  local email
  email="$(var_setting signup_site_service_account)"
  if [[ -n "$email" && "$email" == *"@$PROJECT.iam.gserviceaccount.com" ]] \
    && ! gcloud iam service-accounts describe "$email" --project="$PROJECT" >/dev/null 2>&1; then
    fail_check "variables: signup_site_service_account $email does not exist: create it (gcloud iam service-accounts create ${email%%@*} --project=$PROJECT) or remove the setting and Terraform creates one"
  fi
}

# The Cloud Run CPU the services may use at max_instances (one vCPU each), against the region's
# CPU allocation quota (a new project's, or a young region's, can be lower than the default).
check_quotas() {
  local capacity="$1" quotas verdict
  if ! quotas="$(gcloud quotas info list --service=run.googleapis.com --project="$PROJECT" --format=json 2>/dev/null)"; then
    note "Cloud Run quotas of $PROJECT not checked (the Cloud Quotas API did not answer)"
    return
  fi
  verdict="$("$PY" - "$capacity" "$quotas" "$REGION" <<'PY'
import json, re, sys
capacity, quotas, region = json.loads(sys.argv[1]), json.loads(sys.argv[2] or "[]"), sys.argv[3]
need = capacity["instances"] * capacity["cpu"]
found = []
for quota in quotas:
    name = quota.get("quotaId", "")
    # The per-region CPU allocation quota (CpuAllocPerProjectRegion); not GPUs, not jobs' own limits.
    if not re.search(r"cpu.*alloc|alloc.*cpu", name, re.I) or re.search(r"gpu|job", name, re.I) or "region" not in quota.get("dimensions", []):
        continue
    for info in quota.get("dimensionsInfos", []):
        where = info.get("dimensions", {}).get("region")
        value = int(info.get("details", {}).get("value", -1))
        if where in (None, region) and value >= 0:
            found.append((name, value))
short = [f"{name} is {value}, the services may use {need} vCPU" for name, value in found if value < need]
print("short: " + "; ".join(short) if short else "ok" if found else "none")
PY
)"
  case "$verdict" in
    ok) ;;
    none) note "no Cloud Run CPU quota for $REGION in $PROJECT's quota list, not checked" ;;
    short:*) fail_check "quota: Cloud Run in $REGION: ${verdict#short: }: request more (console: IAM & Admin > Quotas, service run.googleapis.com) or lower functions.*.max_instances in $VAR_FILE" ;;
  esac
}

# db_connectivity (infra/network.tf) when the var file does not set it: the deployment's own (its
# state), so that no later run flips an instance between public and private IP; for a new one,
# "private_ip" where sql.restrictPublicIp forbids the public IP (check_org_policies); else the
# default. Needs terraform init (the state) first; appends to TF_VARS.
choose_db_connectivity() {
  [[ -n "$DB_CONNECTIVITY" ]] && return 0
  local deployed
  deployed="$(tf output -raw db_connectivity 2>/dev/null || true)"
  case "$deployed" in
    public_ip | private_ip)
      TF_VARS+=("-var=db_connectivity=$deployed")
      if [[ "$deployed" == public_ip && "$PUBLIC_IP_FORBIDDEN" == true ]]; then
        note "sql.restrictPublicIp is now enforced, but this deployment's instance has its public IP (the policy does not act on what exists): set db_connectivity = \"private_ip\" in $VAR_FILE to move it"
      fi
      ;;
    *)
      if [[ "$PUBLIC_IP_FORBIDDEN" == true ]]; then
        note "sql.restrictPublicIp is enforced: deploying with db_connectivity = \"private_ip\" (no public IP; a VPC with Direct VPC egress, docs/deploy.md, \"Private IP\"). Set it in $VAR_FILE to say so there too."
        TF_VARS+=("-var=db_connectivity=private_ip")
      fi
      ;;
  esac
}
