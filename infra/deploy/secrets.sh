# shellcheck shell=bash
# Secret values, taken up front (sourced by deploy.sh). For each secret the chosen transports need
# (the plan's required_secrets) that has no enabled version yet, the value comes from, in order:
#   --secret-file SETTING=PATH        the file's content (one trailing newline dropped)
#   DEPLOY_SECRET_<SETTING>           an environment variable
#   TOKEN_KEYS only: generated        as `verifyctl new-key` makes it (new_key_spec), never shown
#   a prompt                          when stdin is a terminal; the input is not echoed
# Values stay in this shell's memory until they are piped to `gcloud secrets versions add` on
# stdin: never on a command line, in a file of ours, in Terraform state or in a log.

declare -A SECRET_FILES=()  # SETTING -> PATH, from --secret-file
declare -A SECRET_VALUES=() # SETTING -> value still to add
declare -A SECRET_IDS=()    # SETTING -> Secret Manager secret ID

add_secret_file() {
  local spec="$1"
  [[ "$spec" == *=* && -n "${spec%%=*}" ]] || die "--secret-file takes SETTING=PATH (e.g. TWILIO_AUTH_TOKEN=twilio.txt), got '$spec'"
  SECRET_FILES["${spec%%=*}"]="${spec#*=}"
}

# A fresh TOKEN_KEYS entry from the package's own new_key_spec (standard library only; no install).
new_token_key() {
  "$PY" -I -S -c 'import sys
sys.path.insert(0, sys.argv[1])
from signup_verification.verifications.tokens import new_key_spec
print(new_key_spec())' "$ROOT/shared"
}

secret_has_version() {
  local found
  found="$(gcloud secrets versions list "$1" --project="$PROJECT" --filter=state:ENABLED --limit=1 --format='value(name)' 2>/dev/null || true)"
  [[ -n "$found" ]]
}

# collect_secrets REQUIRED_JSON MODE: MODE "run" prompts for what is missing; "check" only reports.
collect_secrets() {
  local required="$1" mode="$2" setting id value env_name interactive=false
  [[ -t 0 ]] && interactive=true
  for setting in "${!SECRET_FILES[@]}"; do
    if [[ "$(json_value "$required" "$setting")" == "" ]]; then
      fail_check "secrets: --secret-file names $setting, which this configuration does not use: one of $(json_pairs "$required" | cut -f1 | tr '\n' ' ')"
    fi
  done
  # The list arrives on fd 3: stdin stays the terminal a prompt reads from.
  while IFS=$'\t' read -r -u 3 setting id; do
    [[ -z "$setting" ]] && continue
    SECRET_IDS["$setting"]="$id"
    secret_has_version "$id" && continue
    env_name="DEPLOY_SECRET_$setting"
    if [[ -n "${SECRET_FILES[$setting]:-}" ]]; then
      if [[ ! -r "${SECRET_FILES[$setting]}" ]]; then
        fail_check "secrets: --secret-file $setting=${SECRET_FILES[$setting]}: no such readable file"
        continue
      fi
      value="$(<"${SECRET_FILES[$setting]}")"
    elif [[ -n "${!env_name:-}" ]]; then
      value="${!env_name}"
    elif [[ "$setting" == TOKEN_KEYS ]]; then
      [[ "$mode" == check ]] && continue # generated when the run needs it
      value="$(new_token_key)" || die "TOKEN_KEYS could not be generated (shared/signup_verification/verifications/tokens.py)"
    elif [[ "$interactive" == true && "$mode" == run ]]; then
      read -rs -p "deploy.sh: value of $setting (secret $id; input hidden): " value
      echo >&2
    elif [[ "$interactive" == true ]]; then
      note "$setting has no value yet: ./deploy.sh will prompt for it"
      continue
    else
      fail_check "secrets: $setting (secret $id) has no value: set $env_name, pass --secret-file $setting=PATH, or run ./deploy.sh in a terminal to be prompted"
      continue
    fi
    value="${value%$'\n'}"
    if [[ -z "$value" ]]; then
      fail_check "secrets: the value given for $setting is empty: supply the real value"
      continue
    fi
    SECRET_VALUES["$setting"]="$value"
  done 3< <(json_pairs "$required")
}

# Each collected value becomes the secret's first enabled version (after the container exists).
add_secret_versions() {
  local setting
  for setting in "${!SECRET_VALUES[@]}"; do
    step "adding a version to ${SECRET_IDS[$setting]} ($setting)"
    printf %s "${SECRET_VALUES[$setting]}" \
      | gcloud secrets versions add "${SECRET_IDS[$setting]}" --project="$PROJECT" --data-file=- >/dev/null \
      || die "could not add a version to ${SECRET_IDS[$setting]}: is the secret there (phase 1)? run ./deploy.sh again"
    unset 'SECRET_VALUES[$setting]'
  done
}
