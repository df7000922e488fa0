"""The authorization matrix: what every route answers to every kind of user, as data.

Read ``EXPECTED`` as a table. One row per route (its URL name, or its pattern where it has none) and
method; the columns are the user classes of tests/security/world.py:

    anon      not logged in              eng       ML engineer (launched the experiment, made the
    norole    logged in, no role                   audit and the review request)
    steward   data steward (owns the     eng2      another ML engineer
              dataset and staged upload) reviewer  reviewer
    steward2  another data steward       committee ethics-committee member
    admin     the administrator role     super     Django superuser without a portal role

A cell is the answer expected:

    login     302 to /login/?next=... (a page asked for without a session)
    alogin    302 to /admin/login/?next=... (the admin site asked for without a staff session)
    401       401 with a WWW-Authenticate header (the API without a session)
    302       a redirect elsewhere (done, or back to the page with a message)
    NNN       that status; 403: a member without the role or right; 404: the object is hidden from
              this user (an account without roles sees nothing; a staged upload is its uploader's)

``body`` names the minimal body a POST sends (BODIES in test_authorization_matrix.py): enough to get
past the form's "this field is required", so that the answer is the authorization's, not the
form's; "-" sends an empty form (pages) or ``{}`` (API).

Besides its status, every 200 is read for what must not be in it: an account without roles (and the
superuser, outside the admin site) sees no object's name; nobody sees another user's staged upload;
only ML engineers and administrators see a trial's log tail, checkpoint path and full config.

Not in the table, in test_authorization_matrix.py: the gate token opens the gate and a deployment's status, and
no other route; a steward cannot add a version to another steward's dataset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.security.world import USER_CLASSES

# fmt: off
EXPECTED = """
# route                            meth body      anon   norole stew   stew2  eng    eng2   rev    comm   admin  super
# Pages: without a session, the login page; an account without roles gets 403 on a page of a role
# and 404 on any object (it must not learn that one exists); the superuser holds no portal role.
home                               GET  -         login  200    200    200    200    200    200    200    200    200
login                              GET  -         200    200    200    200    200    200    200    200    200    200
login                              POST -         200    200    200    200    200    200    200    200    200    200
logout                             GET  -         405    405    405    405    405    405    405    405    405    405
logout                             POST -         302    302    302    302    302    302    302    302    302    302
# One's own password (the current one asked; an empty form: 400). A password link that is not one: 404.
accounts:password-change           GET  -         login  200    200    200    200    200    200    200    200    200
accounts:password-change           POST -         login  400    400    400    400    400    400    400    400    400
accounts:password-set              GET  -         404    404    404    404    404    404    404    404    404    404
accounts:password-set              POST -         404    404    404    404    404    404    404    404    404    404
# The members pages are the administrators' (everyone else 403). An action answers 303 back to the
# member's page, done or refused with the reason: the world's member is eng2 (holds no reviewer role
# to revoke, has used the account so its address is theirs to change). The world's role proposal is
# the admin's own, which a different administrator confirms (403), and any administrator withdraws.
accounts:members                   GET  -         login  403    403    403    403    403    403    403    200    403
accounts:member-new                GET  -         login  403    403    403    403    403    403    403    200    403
accounts:member-new                POST -         login  403    403    403    403    403    403    403    400    403
accounts:member                    GET  -         login  403    403    403    403    403    403    403    200    403
accounts:member-role-grant         GET  -         login  405    405    405    405    405    405    405    405    405
accounts:member-role-grant         POST role      login  403    403    403    403    403    403    403    303    403
accounts:member-role-revoke        GET  -         login  405    405    405    405    405    405    405    405    405
accounts:member-role-revoke        POST role      login  403    403    403    403    403    403    403    303    403
accounts:member-active             GET  -         login  405    405    405    405    405    405    405    405    405
accounts:member-active             POST active    login  403    403    403    403    403    403    403    303    403
accounts:member-password-reset     GET  -         login  405    405    405    405    405    405    405    405    405
accounts:member-password-reset     POST -         login  403    403    403    403    403    403    403    303    403
accounts:member-email              GET  -         login  405    405    405    405    405    405    405    405    405
accounts:member-email              POST email     login  403    403    403    403    403    403    403    303    403
accounts:role-proposal-confirm     GET  -         login  405    405    405    405    405    405    405    405    405
accounts:role-proposal-confirm     POST -         login  403    403    403    403    403    403    403    403    403
accounts:role-proposal-withdraw    GET  -         login  405    405    405    405    405    405    405    405    405
accounts:role-proposal-withdraw    POST -         login  403    403    403    403    403    403    403    303    403
# The activity log: every member reads it and asks for the chain's verification (303 back to the log,
# done or refused as too soon); each 200 is also read for a checkpoint's path (the leak check above).
activity:log                       GET  -         login  403    200    200    200    200    200    200    200    403
activity:verify                    GET  -         login  405    405    405    405    405    405    405    405    405
activity:verify                    POST -         login  403    303    303    303    303    303    303    303    403
# /datasets/ sends to the datasets list, the home page.
datasets:index                     GET  -         login  302    302    302    302    302    302    302    302    302
# A staged upload is private to the steward who uploaded it: 404 to everyone else.
datasets:upload                    GET  -         login  403    200    200    403    403    403    403    403    403
datasets:upload                    POST -         login  403    200    200    403    403    403    403    403    403
datasets:declare                   GET  -         login  404    200    404    404    404    404    404    404    404
datasets:declare                   POST -         login  404    400    404    404    404    404    404    404    404
datasets:staged-status             GET  -         login  404    200    404    404    404    404    404    404    404
datasets:discard                   GET  -         login  405    405    405    405    405    405    405    405    405
datasets:discard                   POST -         login  404    302    404    404    404    404    404    404    404
# Datasets: every member reads them (302: a dataset's page is its latest version's).
datasets:detail                    GET  -         login  404    302    302    302    302    302    302    302    404
datasets:version                   GET  -         login  404    200    200    200    200    200    200    200    404
datasets:check                     GET  -         login  405    405    405    405    405    405    405    405    405
datasets:check                     POST -         login  404    302    302    403    403    403    403    302    404
# Only the dataset's stewards or an administrator retire its versions.
datasets:retire                    GET  -         login  405    405    405    405    405    405    405    405    405
datasets:retire                    POST reason    login  404    302    403    403    403    403    403    302    404
# Only an administrator changes a dataset's stewards.
datasets:stewards                  GET  -         login  405    405    405    405    405    405    405    405    405
datasets:stewards                  POST steward   login  404    403    403    403    403    403    403    302    404
experiments:index                  GET  -         login  200    200    200    200    200    200    200    200    200
experiments:new                    GET  -         login  403    403    403    200    200    403    403    403    403
experiments:new                    POST -         login  403    403    403    200    200    403    403    403    403
# Every member reads these; each 200 is also read for a trial's log tail, checkpoint path and full
# config, which only ML engineers and administrators may see (the leak check above).
experiments:detail                 GET  -         login  404    200    200    200    200    200    200    200    404
experiments:progress               GET  -         login  404    200    200    200    200    200    200    200    404
experiments:live                   GET  -         login  404    200    200    200    200    200    200    200    404
experiments:figures                GET  -         login  404    200    200    200    200    200    200    200    404
experiments:timeline-csv           GET  -         login  404    200    200    200    200    200    200    200    404
# Only the launcher or an administrator cancels an experiment.
experiments:cancel                 GET  -         login  405    405    405    405    405    405    405    405    405
experiments:cancel                 POST -         login  404    403    403    302    403    403    403    302    404
# Prediction audits are readable by every member (audits.selectors); retiring one is for its
# creator, a reviewer or an administrator.
audits:predictions                 GET  -         login  200    200    200    200    200    200    200    200    200
audits:prediction-new              GET  -         login  403    403    403    200    200    200    403    403    403
audits:prediction-new              POST -         login  403    403    403    200    200    200    403    403    403
audits:prediction                  GET  -         login  404    200    200    200    200    200    200    200    404
audits:prediction-comparisons-csv  GET  -         login  404    200    200    200    200    200    200    200    404
audits:prediction-retire           GET  -         login  405    405    405    405    405    405    405    405    405
audits:prediction-retire           POST reason    login  404    403    403    302    403    302    403    302    404
# A large file's audit while a worker has it: its uploader's alone (404 to everyone else).
audits:prediction-queued           GET  -         login  404    404    404    200    404    404    404    404    404
audits:prediction-queued-status    GET  -         login  404    404    404    200    404    404    404    404    404
# Paired comparisons: every member reads them (as audits); ML engineers and reviewers make them.
comparisons:list                   GET  -         login  200    200    200    200    200    200    200    200    200
comparisons:new                    GET  -         login  403    403    403    200    200    200    403    403    403
comparisons:new                    POST -         login  403    403    403    200    200    200    403    403    403
comparisons:new-audits             GET  -         login  405    405    405    405    405    405    405    405    405
comparisons:new-audits             POST -         login  403    403    403    400    400    400    403    403    403
comparisons:new-trials             GET  -         login  405    405    405    405    405    405    405    405    405
comparisons:new-trials             POST -         login  403    403    403    400    400    400    403    403    403
comparisons:detail                 GET  -         login  404    200    200    200    200    200    200    200    404
# The state a pending comparison's page polls (JSON): as the comparison.
comparisons:status                 GET  -         login  404    200    200    200    200    200    200    200    404
# Why a trial's model has its gaps: every member reads a trial's attributions (as the trial); ML engineers
# and reviewers ask for them (an empty form: 303 back to the page with its errors).
attributions:trial                 GET  -         login  404    200    200    200    200    200    200    200    404
attributions:detail                GET  -         login  404    200    200    200    200    200    200    200    404
attributions:request               GET  -         login  405    405    405    405    405    405    405    405    405
attributions:request               POST -         login  404    403    403    303    303    303    403    403    404
# What-if thresholds: started and frozen by those who run audits, read by every member (as audits).
audits:whatif-new                  GET  -         login  403    403    403    200    200    200    403    403    403
audits:whatif-new                  POST -         login  403    403    403    200    200    200    403    403    403
audits:whatif                      GET  -         login  404    200    200    200    200    200    200    200    404
audits:whatif-freeze               GET  -         login  405    405    405    405    405    405    405    405    405
audits:whatif-freeze               POST -         login  404    403    403    302    302    302    403    403    404
policies:page                      GET  -         login  403    200    200    200    200    200    200    200    403
policies:page                      POST -         login  403    403    403    403    403    403    403    200    403
# A proposal to loosen the policy (another administrator's): any other administrator confirms or withdraws it.
policies:proposal-confirm          GET  -         login  405    405    405    405    405    405    405    405    405
policies:proposal-confirm          POST -         login  403    403    403    403    403    403    403    302    403
policies:proposal-withdraw         GET  -         login  405    405    405    405    405    405    405    405    405
policies:proposal-withdraw         POST -         login  403    403    403    403    403    403    403    302    403
# The A/B test planner stores nothing: every member plans (a GET form).
comparisons:planner                GET  -         login  403    200    200    200    200    200    200    200    403
evidence:document                  GET  -         login  404    200    200    200    200    200    200    200    404
evidence:canonical                 GET  -         login  404    200    200    200    200    200    200    200    404
# Freezing a trial's validation: ML engineers and reviewers.
trial-validation-freeze            GET  -         login  405    405    405    405    405    405    405    405    405
trial-validation-freeze            POST step      login  404    403    403    302    302    302    403    403    404
# Review requests: the roles and states of approvals/rules.py. An empty body is refused before the
# rule is asked (services check the input first), so the POSTs send minimal bodies. The request page's
# forms answer what they refuse for the state or the input with 303 back to the page (the form shown
# again there, lib/forms.form_failed_redirect); the API with 400. approvals:status: the JSON the page
# polls after a decision.
approvals:queue                    GET  -         login  403    200    200    200    200    200    200    200    403
approvals:list                     GET  -         login  403    200    200    200    200    200    200    200    403
approvals:new                      GET  -         login  403    403    403    200    200    200    403    403    403
approvals:new                      POST -         login  403    403    403    200    200    200    403    403    403
approvals:request                  GET  -         login  404    200    200    200    200    200    200    200    404
approvals:status                   GET  -         login  404    200    200    200    200    200    200    200    404
approvals:revise                   GET  -         login  405    405    405    405    405    405    405    405    405
approvals:revise                   POST -         login  404    403    403    303    403    403    403    403    404
approvals:submit                   GET  -         login  405    405    405    405    405    405    405    405    405
approvals:submit                   POST -         login  404    403    403    303    403    403    403    403    404
approvals:start-review             GET  -         login  405    405    405    405    405    405    405    405    405
approvals:start-review             POST -         login  404    403    403    403    403    303    303    403    404
approvals:request-changes          GET  -         login  405    405    405    405    405    405    405    405    405
approvals:request-changes          POST changes   login  404    403    403    403    403    302    403    403    404
approvals:withdraw                 GET  -         login  405    405    405    405    405    405    405    405    405
approvals:withdraw                 POST withdraw  login  404    403    403    302    403    403    403    403    404
approvals:revoke                   GET  -         login  405    405    405    405    405    405    405    405    405
approvals:revoke                   POST revoke    login  404    403    403    403    403    403    303    303    404
approvals:recommend                GET  -         login  405    405    405    405    405    405    405    405    405
approvals:recommend                POST recommend login  404    403    403    403    403    302    403    403    404
approvals:comment                  GET  -         login  405    405    405    405    405    405    405    405    405
approvals:comment                  POST comment   login  404    403    403    302    302    302    302    403    404
approvals:vote                     GET  -         login  405    405    405    405    405    405    405    405    405
approvals:vote                     POST vote      login  404    403    403    403    403    403    302    403    404
approvals:waiver                   GET  -         login  405    405    405    405    405    405    405    405    405
approvals:waiver                   POST waiver    login  404    403    403    303    403    303    303    403    404
approvals:waiver-vote              GET  -         login  405    405    405    405    405    405    405    405    405
approvals:waiver-vote              POST wvote     login  404    403    403    403    403    403    302    403    404
# Resuming a round paused by a role change: the world's request is not paused (400 to who may resume).
approvals:resume                   GET  -         login  405    405    405    405    405    405    405    405    405
approvals:resume                   POST resume    login  404    403    403    403    403    403    303    303    404
# Deployments (monitoring): every member reads them (an account without a role: 403 on the list, 404 on one).
monitoring:list                    GET  -         login  403    200    200    200    200    200    200    200    403
monitoring:deployment              GET  -         login  404    200    200    200    200    200    200    200    404
# A deployment's monitoring reports (the reports app's page): every member reads them; administrators,
# committee members and reviewers ask for one (an empty form: 400, after the authorization).
deployment-reports                 GET  -         login  404    200    200    200    200    200    200    200    404
deployment-reports                 POST -         login  404    403    403    403    403    400    400    400    404
# Reports are signed by the committee members named in them.
reports:list                       GET  -         login  200    200    200    200    200    200    200    200    200
reports:detail                     GET  -         login  404    200    200    200    200    200    200    200    404
reports:sign                       GET  -         login  405    405    405    405    405    405    405    405    405
reports:sign                       POST password  login  404    403    403    403    403    403    302    403    404
reports:revision                   GET  -         login  404    200    200    200    200    200    200    200    404
reports:verify                     GET  -         login  403    200    200    200    200    200    200    200    403
reports:verify                     POST -         login  403    400    400    400    400    400    400    400    403
# Public: a third party needs the certificates to check a report with their own tools.
reports:authorities                GET  -         200    200    200    200    200    200    200    200    200    200
reports:authority-pem              GET  -         200    200    200    200    200    200    200    200    200    200
# The API: 401 with WWW-Authenticate without a session; otherwise as the pages. The API's posts take
# JSON; a prediction audit takes a file (415 to JSON).
api-schema                         GET  -         401    200    200    200    200    200    200    200    200    200
api-docs                           GET  -         login  200    200    200    200    200    200    200    200    200
api-dataset-list                   GET  -         401    200    200    200    200    200    200    200    200    200
api-dataset-version                GET  -         401    404    200    200    200    200    200    200    200    404
api-experiment-list                GET  -         401    200    200    200    200    200    200    200    200    200
api-experiment-list                POST experiment 401    404    403    403    201    201    403    403    403    404
api-experiment                     GET  -         401    404    200    200    200    200    200    200    200    404
api-experiment-cancel              GET  -         401    405    405    405    405    405    405    405    405    405
api-experiment-cancel              POST -         401    404    403    403    200    403    403    403    200    404
api-prediction-audit-list          GET  -         401    200    200    200    200    200    200    200    200    200
api-prediction-audit-list          POST -         401    403    403    403    415    415    415    403    403    403
api-prediction-audit               GET  -         401    404    200    200    200    200    200    200    200    404
api-prediction-audit-retire        GET  -         401    405    405    405    405    405    405    405    405    405
api-prediction-audit-retire        POST reason    401    404    403    403    200    403    200    403    200    404
api-comparison-list                GET  -         401    200    200    200    200    200    200    200    200    200
api-comparison-list                POST -         401    403    403    403    415    415    415    403    403    403
api-comparison                     GET  -         401    404    200    200    200    200    200    200    200    404
api-comparison-trials              GET  -         401    405    405    405    405    405    405    405    405    405
api-comparison-trials              POST -         401    403    403    403    400    400    400    403    403    403
api-comparison-audits              GET  -         401    405    405    405    405    405    405    405    405    405
api-comparison-audits              POST -         401    403    403    403    415    415    415    403    403    403
# A trial's attributions: the world's trial's checkpoint folder holds no weights (400, naming the trial).
api-trial-attributions             GET  -         401    405    405    405    405    405    405    405    405    405
api-trial-attributions             POST -         401    404    403    403    400    400    400    403    403    404
api-trial-attribution              GET  -         401    404    200    200    200    200    200    200    200    404
api-prediction-audit-queued        GET  -         401    404    404    404    200    404    404    404    404    404
api-whatif-list                    GET  -         401    405    405    405    405    405    405    405    405    405
api-whatif-list                    POST -         401    403    403    403    415    415    415    403    403    403
api-whatif                         GET  -         401    404    200    200    200    200    200    200    200    404
api-whatif-suggestion              GET  -         401    404    200    200    200    200    200    200    200    404
api-whatif-freeze                  GET  -         401    405    405    405    405    405    405    405    405    405
api-whatif-freeze                  POST -         401    404    403    403    201    201    201    403    403    404
api-policy                         GET  -         401    403    200    200    200    200    200    200    200    403
api-policy                         POST -         401    403    403    403    403    403    403    403    400    403
api-policy-proposals               GET  -         401    403    200    200    200    200    200    200    200    403
api-policy-proposal-confirm        GET  -         401    405    405    405    405    405    405    405    405    405
api-policy-proposal-confirm        POST -         401    403    403    403    403    403    403    403    200    403
api-policy-proposal-withdraw       GET  -         401    405    405    405    405    405    405    405    405    405
api-policy-proposal-withdraw       POST -         401    403    403    403    403    403    403    403    200    403
api-comparisons-plan               GET  -         401    405    405    405    405    405    405    405    405    405
api-comparisons-plan               POST -         401    403    400    400    400    400    400    400    400    403
# The documents' list: an account without a role (and the superuser) gets an empty list, as for audits.
api-verdict-document-list          GET  -         401    200    200    200    200    200    200    200    200    200
api-verdict-document               GET  -         401    404    200    200    200    200    200    200    200    404
api-verdict-document-canonical     GET  -         401    404    200    200    200    200    200    200    200    404
# The gate answers pipelines holding a gate token (test_the_gate_token_opens_the_gate_and_the_deployments_status_only);
# a member's session without ?model= is a 400.
api-gate                           GET  -         401    403    400    400    400    400    400    400    400    403
api-review-requests                GET  -         401    403    200    200    200    200    200    200    200    403
api-review-requests                POST request   401    404    403    403    400    400    400    403    403    404
api-review-request                 GET  -         401    404    200    200    200    200    200    200    200    404
api-review-request-revise          GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-revise          POST -         401    404    403    403    400    403    403    403    403    404
api-review-request-submit          GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-submit          POST -         401    404    403    403    400    403    403    403    403    404
api-review-request-start-review    GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-start-review    POST -         401    404    403    403    403    403    400    400    403    404
api-review-request-request-changes GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-request-changes POST reason    401    404    403    403    403    403    200    403    403    404
api-review-request-withdraw        GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-withdraw        POST reason    401    404    403    403    200    403    403    403    403    404
api-review-request-resume          GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-resume          POST reason    401    404    403    403    403    403    403    400    400    404
api-review-request-revoke          GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-revoke          POST reason    401    404    403    403    403    403    403    400    400    404
api-review-request-recommend       GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-recommend       POST recommend 401    404    403    403    403    403    201    403    403    404
api-review-request-comment         GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-comment         POST comment   401    404    403    403    201    201    201    201    403    404
api-review-request-vote            GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-vote            POST vote      401    404    403    403    403    403    403    201    403    404
api-review-request-waiver          GET  -         401    405    405    405    405    405    405    405    405    405
api-review-request-waiver          POST waiver    401    404    403    403    400    403    400    400    403    404
api-waiver-vote                    GET  -         401    405    405    405    405    405    405    405    405    405
api-waiver-vote                    POST wvote     401    404    403    403    403    403    403    201    403    404
# Deployments: ML engineers and administrators create them and promote (the world's review request's
# model is not approved: 400 with the reason); administrators change a monitor policy, and confirm or
# withdraw another administrator's loosening. A gate or monitoring token reads a deployment's status
# (test_the_gate_token_opens_the_gate_and_the_deployments_status_only).
api-deployments                    GET  -         401    403    200    200    200    200    200    200    200    403
api-deployments                    POST deployment 401   403    403    403    201    201    403    403    201    403
api-deployment                     GET  -         401    404    200    200    200    200    200    200    200    404
api-deployment-promote             GET  -         401    405    405    405    405    405    405    405    405    405
api-deployment-promote             POST model     401    404    403    403    400    400    403    403    400    404
api-deployment-policy              GET  -         401    404    200    200    200    200    200    200    200    404
api-deployment-policy              POST spec      401    404    403    403    403    403    403    403    201    404
api-deployment-policy-proposal-confirm GET -      401    405    405    405    405    405    405    405    405    405
api-deployment-policy-proposal-confirm POST -     401    404    403    403    403    403    403    403    200    404
api-deployment-policy-proposal-withdraw GET -     401    405    405    405    405    405    405    405    405    405
api-deployment-policy-proposal-withdraw POST -    401    404    403    403    403    403    403    403    200    404
# Webhooks: administrators only (a member 403; an account without roles, and the superuser, 404 for the
# deployment); gate and monitoring tokens get 401 (test_the_gate_token_opens_the_gate_...).
api-deployment-batches             GET  -         401    404    403    403    200    200    403    403    200    404
api-deployment-batches             POST -         401    403    403    403    403    403    403    403    403    403
api-deployment-batch               GET  -         401    404    403    403    200    200    403    403    200    404
api-deployment-batch               POST -         405    405    405    405    405    405    405    405    405    405
api-deployment-batch-labels        GET  -         405    405    405    405    405    405    405    405    405    405
api-deployment-batch-labels        POST -         401    403    403    403    403    403    403    403    403    403
api-deployment-looks               GET  -         401    404    403    403    200    200    403    403    200    404
api-deployment-looks               POST -         405    405    405    405    405    405    405    405    405    405
api-deployment-webhooks            GET  -         401    404    403    403    403    403    403    403    200    404
api-deployment-webhooks            POST url       401    404    403    403    403    403    403    403    201    404
api-deployment-webhook-deactivate  GET  -         401    405    405    405    405    405    405    405    405    405
api-deployment-webhook-deactivate  POST -         401    404    403    403    403    403    403    403    200    404
api-deployment-webhook-deliveries  GET  -         401    404    403    403    403    403    403    403    200    404
api-deployment-webhook-deliveries  POST -         401    405    405    405    405    405    405    405    405    405
# A deployment's monitoring report: administrators, committee members and reviewers (an empty body: 400,
# after the authorization).
api-deployment-reports             GET  -         401    405    405    405    405    405    405    405    405    405
api-deployment-reports             POST -         401    404    403    403    403    403    400    400    400    404
api-report-verify                  GET  -         401    405    405    405    405    405    405    405    405    405
api-report-verify                  POST -         401    403    415    415    415    415    415    415    415    403
# Reports, as their pages: every member reads every report (an account without roles gets an empty
# list and 404 on one). The committee member is a signatory of the world's report and signs it with
# the password in the body; anyone else is refused (a token too: test_reports_api.py).
api-report-list                    GET  -         401    200    200    200    200    200    200    200    200    200
api-report                         GET  -         401    404    200    200    200    200    200    200    200    404
api-report-pdf                     GET  -         401    404    200    200    200    200    200    200    200    404
api-report-sign                    GET  -         401    405    405    405    405    405    405    405    405    405
api-report-sign                    POST password  401    404    403    403    403    403    403    200    403    404
# The admin site (its models' routes: ADMIN_MODELS below): staff only, and the only staff account
# here is the superuser. A logged-in non-staff user sees the admin's login form; its logout sends
# anyone who is not staff to the admin's index (hence its login).
admin:index                        GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 200
admin:login                        GET  -         200    200    200    200    200    200    200    200    200    302
admin:login                        POST -         200    200    200    200    200    200    200    200    200    200
admin:logout                       GET  -         302    302    302    302    302    302    302    302    302    405
admin:logout                       POST -         302    302    302    302    302    302    302    302    302    302
# The admin site's own "change password" is the portal's page, which writes the event.
admin:password_change              GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 302
admin:password_change              POST -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 302
admin:password_change_done         GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 200
admin:autocomplete                 GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 403
admin:jsi18n                       GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 200
# The report has no page of its own for the admin's "view on site".
admin:view_on_site                 GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 404
admin:app_list                     GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 200
admin/(?P<url>.*)$                 GET  -         alogin alogin alogin alogin alogin alogin alogin alogin alogin 404
"""
# fmt: on

# The admin site: only staff get past its login, and the only staff account here is the superuser;
# every other user class gets `alogin` on every admin route. What the superuser gets depends on the
# model's admin: evidence (and the activity log, and policy versions) is view-only.
ADMIN_MODELS = """
# model                          kind
accounts.apitoken                view-only
accounts.rolegrantproposal       view-only
accounts.user                    view-only
activity.event                   view-only
approvals.acknowledgement        view-only
approvals.comment                view-only
approvals.recommendation         view-only
approvals.reviewrequest          view-only
approvals.reviewvote             view-only
approvals.waivedcomparison       view-only
approvals.waiver                 view-only
approvals.waivervote             view-only
attributions.trialattribution    view-only
audits.predictionaudit           view-only
evidence.verdictdocument         view-only
experiments.experiment           view-only
experiments.trial                view-only
monitoring.deployment            view-only
monitoring.deploymentchange      view-only
monitoring.incident              view-only
monitoring.monitorpolicy         view-only
monitoring.monitorpolicyproposal view-only
monitoring.webhookdelivery       view-only
monitoring.webhookendpoint       view-only
outbox.outboxmessage             view-only
policies.fairnesspolicy          view-only
reports.certificateauthority     view-only
reports.report                   view-only
reports.reportrevision           view-only
reports.signingcertificate       view-only
"""

# The superuser's answer per view and kind: a view-only admin shows rows and refuses add, change and
# delete (lib/admin.EvidenceAdmin; users too: they change only through the list's actions, which call
# accounts.services, and are never deleted: their names stay in the activity log);
# an empty POST to a form shows it again with its errors (200). "redirect" is <object_id>/, which
# sends to the change page.
ADMIN_VIEWS = """
view         method  view-only  editable
changelist   GET     200        200
changelist   POST    200        200
add          GET     403        200
add          POST    403        200
change       GET     200        200
change       POST    403        200
delete       GET     403        200
delete       POST    403        200
history      GET     200        200
redirect     GET     302        302
"""

_ADMIN_MODEL_ROUTE = re.compile(r"^admin:(?P<model>[a-z]+_[a-z]+)_(?P<view>changelist|add|history|delete|change)$")
_ADMIN_REDIRECT = re.compile(r"^admin/(?P<app>[a-z_]+)/(?P<model>[a-z_]+)/<path:object_id>/$")


@dataclass(frozen=True)
class Cell:
    answer: str  # "login", "alogin", "401", "302" or a status

    @classmethod
    def parse(cls, text: str) -> Cell:
        if text not in ("login", "alogin") and not re.fullmatch(r"[1-5]\d\d", text):
            raise ValueError(f"not an expected answer: {text!r}")
        return cls(text)

    def __str__(self) -> str:
        return self.answer


@dataclass(frozen=True)
class Row:
    key: str
    method: str
    body: str
    cells: dict[str, Cell]


def _lines(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _rows() -> dict[tuple[str, str], Row]:
    rows: dict[tuple[str, str], Row] = {}
    for words in _lines(EXPECTED):
        key, method, body, *cells = words
        if len(cells) != len(USER_CLASSES):
            raise ValueError(f"{key} {method}: {len(cells)} cells, not {len(USER_CLASSES)}")
        if (key, method) in rows:
            raise ValueError(f"{key} {method}: two rows")
        rows[key, method] = Row(key, method, body, dict(zip(USER_CLASSES, map(Cell.parse, cells), strict=True)))
    return rows


def _admin_models() -> dict[str, str]:
    """``app_model`` (as admin URL names spell it) -> the kind of its admin."""
    return {label.replace(".", "_"): kind for label, kind in _lines(ADMIN_MODELS)}


def _admin_views() -> dict[tuple[str, str], dict[str, str]]:
    """(view, method) -> kind -> the superuser's answer."""
    lines = _lines(ADMIN_VIEWS)
    kinds = lines[0][2:]
    return {(view, method): dict(zip(kinds, answers, strict=True)) for view, method, *answers in lines[1:]}


ROWS = _rows()
ADMIN_MODEL_KINDS = _admin_models()
ADMIN_VIEW_ANSWERS = _admin_views()


def admin_model_route(key: str) -> tuple[str, str] | None:
    """(app_model, view) of one model's admin route, from its name or, unnamed, its pattern."""
    match = _ADMIN_MODEL_ROUTE.match(key)
    if match is not None:
        return match["model"], match["view"]
    match = _ADMIN_REDIRECT.match(key)
    if match is not None:
        return f"{match['app']}_{match['model']}", "redirect"
    return None


def methods_of(key: str) -> list[str]:
    """The methods the table has rows for (empty: the route is not in the table)."""
    model_view = admin_model_route(key)
    if model_view is not None and model_view[0] in ADMIN_MODEL_KINDS:
        return [method for view, method in ADMIN_VIEW_ANSWERS if view == model_view[1]]
    return [method for route, method in ROWS if route == key]


def expected(key: str, method: str) -> Row | None:
    """The row for a route and method, the admin's model routes spelled out from their kind."""
    model_view = admin_model_route(key)
    if model_view is not None and model_view[0] in ADMIN_MODEL_KINDS:
        model, view = model_view
        answer = ADMIN_VIEW_ANSWERS.get((view, method), {}).get(ADMIN_MODEL_KINDS[model])
        if answer is None:
            return None
        cells = {user: Cell("alogin") for user in USER_CLASSES}
        cells["super"] = Cell.parse(answer)
        return Row(key, method, "-", cells)
    return ROWS.get((key, method))
