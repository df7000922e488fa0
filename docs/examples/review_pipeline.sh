#!/usr/bin/env bash
# A model's whole review through the portal's API, for a CI job (docs/pipelines.md), with curl and jq:
# audit a predictions file, open and submit a review request on its verdict documents, wait for the
# committee's decision, ask the gate, then wait for the signed report, download it and verify it.
#
#     bash review_pipeline.sh PREDICTIONS_FILE MODEL_IDENTIFIER
#
# Settings from the environment, as review_pipeline.py reads them: PORTAL_URL, PORTAL_TOKEN (scope api),
# PORTAL_GATE_TOKEN (scope gate), PORTAL_INTENDED_USE; PORTAL_LABEL (label), PORTAL_PREDICTION
# (prediction), PORTAL_ATTRIBUTES (gender; comma-separated), PORTAL_TITLE, PORTAL_POLL_SECONDS (30),
# PORTAL_WAIT_SECONDS (86400, whole seconds, for each wait), PORTAL_REPORT_DIR (.). Exit 0: approved, the
# gate agrees and the signed report is verified; 1: anything else, with the reason.
set -euo pipefail

fail() {
    echo "review_pipeline: $*" >&2
    exit 1
}
command -v curl >/dev/null && command -v jq >/dev/null || fail "needs curl and jq"
(($# == 2)) || fail "usage: review_pipeline.sh PREDICTIONS_FILE MODEL_IDENTIFIER"
file=$1 model=$2
for name in PORTAL_URL PORTAL_TOKEN PORTAL_GATE_TOKEN PORTAL_INTENDED_USE; do
    [[ -n ${!name:-} ]] || fail "set $name (see docs/pipelines.md)"
done
base=${PORTAL_URL%/}
poll=${PORTAL_POLL_SECONDS:-30} wait=${PORTAL_WAIT_SECONDS:-86400}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# api METHOD PATH [CURL ARGS...]: the answer's body on stdout; a refusal ends the script with the API's
# answer. PATH may be a URL path the API gave (status_url, url, pdf_url). token= picks another token.
api() {
    local method=$1 path=$2 status
    shift 2
    status=$(curl -sS -o "$work/body" -D "$work/headers" -w '%{http_code}' -X "$method" \
        -H "Authorization: Token ${token:-$PORTAL_TOKEN}" -H "Accept: application/json, application/pdf" \
        "$@" "$base$path") || fail "$method $base$path: no answer"
    [[ $status == 2?? ]] || fail "$method $base$path: HTTP $status
$(cat "$work/body")"
    cat "$work/body"
}

# until_done WHAT COMMAND...: runs COMMAND every $poll seconds until it succeeds (it prints what it found).
# Set -e does not stop a command tested by `until`, so the commands end the script themselves (exit 1).
until_done() {
    local what=$1 deadline=$((SECONDS + wait))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || fail "gave up waiting for $what after $wait s"
        sleep "$poll"
    done
}

# 1. Audit the predictions file: 201 with the audit, or 202 when a worker audits it (poll its status_url).
form=(-F "file=@$file" --form-string "label=${PORTAL_LABEL:-label}")
form+=(--form-string "prediction=${PORTAL_PREDICTION:-prediction}")
IFS=, read -ra attributes <<<"${PORTAL_ATTRIBUTES:-gender}"
for attribute in "${attributes[@]}"; do form+=(--form-string "attributes=$attribute"); done
audit=$(api POST /api/v1/audits/predictions/ "${form[@]}")
if status_url=$(jq -er '.status_url' <<<"$audit"); then
    audited() {
        local status
        status=$(api GET "$status_url") || exit 1
        case $(jq -r .status <<<"$status") in
        done) jq -r .audit_url <<<"$status" ;;
        failed) fail "the audit of $file failed: $(jq -r .error <<<"$status")" ;;
        *) return 1 ;;
        esac
    }
    audit_url=$(until_done "the audit" audited)
    audit=$(api GET "$audit_url")
fi
documents=$(jq -c '[.documents[].id]' <<<"$audit")
echo "audit $(jq -r .id <<<"$audit"): verdict $(jq -r .verdict <<<"$audit"), documents $documents"

# 2. A review request on the audit's verdict documents, submitted to the committee.
body=$(jq -n --arg title "${PORTAL_TITLE:-$model: $(basename "$file")}" --arg use "$PORTAL_INTENDED_USE" \
    --arg model "$model" --argjson documents "$documents" \
    '{title: $title, intended_use: $use, documents: $documents, model_identifier: $model}')
request=$(api POST /api/v1/review-requests/ -H "Content-Type: application/json" --data-binary "$body")
id=$(jq -r .id <<<"$request")
request=$(api POST "/api/v1/review-requests/$id/submit/")
echo "review request $id: $(jq -r .state <<<"$request") ($base$(jq -r .url <<<"$request"))"

# 3. The committee's decision. Submitted and in review: still waiting; approved: go on. Rejected,
#    withdrawn, revoked and suspended are final for this request; draft means changes were requested.
why='if .state == "rejected" then
        [.round as $round | .votes[] | select(.current and .round == $round and .choice == "reject")
         | "\(.voter): \(.reason)"] | join("; ")
    elif .state == "suspended" then .suspension.reason
    elif .state == "revoked" then .revoked_reason
    else (if .state == "withdrawn" then "review_request.withdrawn" else "review_request.changes_requested" end) as $verb
        | ([.timeline[] | select(.verb == $verb) | .data.reason // ""] | last // "") | if . == "" then "no reason given" else . end
    end'
decided() {
    local current state
    current=$(api GET "/api/v1/review-requests/$id/") || exit 1
    state=$(jq -r .state <<<"$current")
    case $state in
    submitted | in_review) return 1 ;;
    approved) jq -r .decided_at <<<"$current" ;;
    *) fail "review request $id is $state: $(jq -r "$why" <<<"$current")" ;;
    esac
}
decided_at=$(until_done "the committee's decision" decided)
echo "decision: approved (review request $id, decided at $decided_at)"

# 4. The gate, as a deployment job asks it (a gate token).
gate=$(token=$PORTAL_GATE_TOKEN api GET "/api/v1/gate/?model=$(jq -rn --arg model "$model" '$model | @uri')")
[[ $(jq -r .approved <<<"$gate") == true ]] || fail "the gate refuses $model: $gate"
echo "gate: approved (review request $(jq -r .request <<<"$gate"), policy version $(jq -r .policy_version <<<"$gate"))"

# 5. The signed report: once every signatory signed it, download its PDF and verify it.
signed() {
    local current
    current=$(api GET "/api/v1/review-requests/$id/") || exit 1
    jq -er '[.reports[] | select(.decision == "approved" and .state == "signed")] | last | .url // empty' <<<"$current"
}
report=$(api GET "$(until_done "the signed report" signed)")
report_id=$(jq -r .id <<<"$report") revision=$(jq -r .latest_revision <<<"$report")
pdf="${PORTAL_REPORT_DIR:+$PORTAL_REPORT_DIR/}report-$report_id-r$revision.pdf"
api GET "$(jq -r .pdf_url <<<"$report")" >"$pdf"
sha256=$(sha256sum "$pdf" | cut -d' ' -f1)
header=$(tr -d '\r' <"$work/headers" | sed -n 's/^[Xx]-[Cc]ontent-[Ss][Hh][Aa]256: *//p')
listed=$(jq -r '[.sha256, .revisions[-1].sha256] | unique | join(" ")' <<<"$report")
[[ $sha256 == "$header" && $sha256 == "$listed" ]] ||
    fail "report $report_id: the PDF's SHA-256 $sha256 is not the one the portal lists ($listed, header $header)"
check=$(api POST /api/v1/reports/verify/ -F "file=@$pdf")
jq -e --argjson id "$report_id" --argjson revision "$revision" \
    '.ok and .report.id == $id and .report.revision == $revision' <<<"$check" >/dev/null ||
    fail "report $report_id does not verify: $(jq -c '.problems' <<<"$check")"
echo "report $report_id revision $revision verified: sha256 $sha256, saved as $pdf"
