# shellcheck shell=bash
# The functions' image (sourced by deploy.sh): built by Cloud Build as the build account from the
# bundle in its bucket (infra/deploy/cloudbuild.yaml), once per bundle. Resumable: an image that
# exists is kept, a build still running for it (an interrupted run's) is waited for: the image
# is named by the bundle's hash, so "a build of this image" is "a build of this bundle".

image_exists() {
  gcloud artifacts docker images describe "$1" --project="$PROJECT" --format='value(image_summary.digest)' >/dev/null 2>&1
}

# wait_for_build ID: polls until the build ends; true when it succeeded.
wait_for_build() {
  local status
  while true; do
    status="$(gcloud builds describe "$1" --project="$PROJECT" --region="$REGION" --format='value(status)')" \
      || die "could not read the state of build $1 (gcloud builds describe $1 --region=$REGION): run ./deploy.sh again to wait for it"
    case "$status" in
      SUCCESS) return 0 ;;
      QUEUED | PENDING | WORKING) sleep "${DEPLOY_POLL_SECONDS:-10}" ;;
      *) return 1 ;;
    esac
  done
}

ensure_image() {
  local build="$1" image="$2" id
  if image_exists "$image"; then
    return 0
  fi
  id="$(gcloud builds list --project="$PROJECT" --region="$REGION" --ongoing \
    --filter="images=$image" --format='value(id)' --limit=1 2>/dev/null || true)"
  if [[ -n "$id" ]]; then
    step "waiting for build $id of this bundle (started by an earlier run)"
  else
    step "building the functions' image (Cloud Build, a few minutes): $image"
    id="$(gcloud builds submit --no-source --config="$INFRA/deploy/cloudbuild.yaml" \
      --substitutions="_BUCKET=$(json_value "$build" bucket),_OBJECT=$(json_value "$build" object),_IMAGE=$image,_BUILDER=$(json_value "$build" builder),_FUNCTION_TARGET=$(json_value "$build" function_target)" \
      --service-account="$(json_value "$build" service_account)" \
      --project="$PROJECT" --region="$REGION" --async --format='value(id)')" \
      || die "Cloud Build refused the image build: its error is above"
  fi
  # A concurrent build of the same bundle may win the (immutable) tag: the image is what counts.
  if ! wait_for_build "$id" && ! image_exists "$image"; then
    die "the image build $id failed: gcloud builds log $id --region=$REGION --project=$PROJECT"
  fi
}

# The schema jobs (migrations, then grants), in Google Cloud, before new code deploys.
run_schema_jobs() {
  local jobs="$1" job
  while read -r job; do
    [[ -z "$job" ]] && continue
    step "running job $job"
    gcloud run jobs execute "$job" --project="$PROJECT" --region="$REGION" --wait \
      || die "job $job failed: gcloud run jobs executions list --job=$job --region=$REGION --project=$PROJECT, then its logs; fix and run ./deploy.sh again"
  done < <("$PY" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$jobs")
}
