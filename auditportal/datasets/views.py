from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.datasets import rules, selectors, services
from auditportal.datasets.forms import DeclarationForm, RetireForm, StewardForm, UploadForm
from auditportal.datasets.models import DatasetVersion, IntegrityPurpose, StagedStatus
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.dataset import group_summary_figure
from auditportal.fairness.figures.serialize import kept_figure_json
from auditportal.fairness.files import tabular
from auditportal.lib.forms import FailedForm, add_user_error, form_failed_redirect, form_failed_restore
from auditportal.lib.uploads import accepts_uploads, report_rejected_uploads


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    return render(
        request,
        "datasets/home.html",
        {
            "datasets": selectors.dataset_list(user=user),
            "can_register": rules.can_register(user),
            "is_member": user.is_member,
            "staged_uploads": selectors.staged_upload_list(user=user),
        },
    )


@login_required
@require_GET
def dataset_index(request: HttpRequest) -> HttpResponse:
    """/datasets/, the folder every dataset page sits in: the datasets list is the home page."""
    return redirect("home")


@accepts_uploads(rules.can_register, who="a data steward")
@login_required
@require_http_methods(["GET", "POST"])
def dataset_upload(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_register(user)
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and not report_rejected_uploads(request, form) and form.is_valid():
        uploaded = form.cleaned_data["file"]
        try:
            staged = services.staged_upload_create(
                user=user,
                source=Path(uploaded.temporary_file_path()),
                original_name=uploaded.name,
                dataset_name=form.cleaned_data["name"],
            )
        except rules.DatasetOwnerRequired as exc:
            form.add_error("name", str(exc))
            return render(request, "datasets/upload.html", {"form": form}, status=403)
        except UserError as exc:
            add_user_error(form, exc)
        else:
            return redirect("datasets:declare", staged_id=staged.pk)
    return render(request, "datasets/upload.html", {"form": form}, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_declare(request: HttpRequest, staged_id: str) -> HttpResponse:
    user = request_user(request)
    # Fetch first: an upload is private to its owner, so anyone else gets 404 whatever their roles.
    staged = selectors.staged_upload_get(user=user, staged_id=str(staged_id))
    rules.check_register(user)
    if staged.status == StagedStatus.REGISTERED:
        version = staged.version
        assert version is not None
        messages.success(request, f"Registered {version} ({version.num_rows:,} rows).")
        return redirect("datasets:version", version_id=version.pk)
    if staged.status != StagedStatus.READY:
        if request.method == "POST":
            # A second submission of the form (double click, back button): show what happens now.
            return redirect("datasets:declare", staged_id=staged.pk)
        return render(
            request, "datasets/staged.html", {"staged": staged, "waiting_for_worker": services.WAITING_FOR_WORKER}
        )
    names = [column["name"] for column in staged.profile["columns"]]
    # A repeated name cannot say which of its columns it means, so it is offered for no role, unless
    # its columns hold the same values in every row (then it is one column).
    identical = staged.profile.get("identical", [])
    repeated = set(tabular.repeated_names(names)) - set(identical)
    columns = [name for name in dict.fromkeys(names) if name not in repeated]
    status = 200
    if request.method == "POST":
        form = DeclarationForm(request.POST, columns=columns)
        if form.is_valid():
            try:
                services.staged_upload_declare(user=user, staged=staged, spec=form.spec())
            except services.StagedUploadBusy:
                pass
            except rules.DatasetOwnerRequired as exc:
                form.add_error(None, str(exc))
                status = 403
            except UserError as exc:
                add_user_error(form, exc)
            if not form.errors:
                return redirect("datasets:declare", staged_id=staged.pk)
    elif staged.error and staged.declaration is not None:
        # The worker refused the last declaration: the form shows it again, with the reason.
        form = DeclarationForm(_declaration_form_data(staged.declaration), columns=columns)
        form.is_valid()
        form.add_error(staged.error_field if staged.error_field in form.fields else None, staged.error)
    else:
        form = DeclarationForm(columns=columns)
    return render(
        request,
        "datasets/declare.html",
        {
            "form": form,
            "staged": staged,
            "profile": staged.profile,
            "warnings": tabular.repeated_columns_warnings(names, identical),
        },
        status=400 if status == 200 and request.method == "POST" and form.errors else status,
    )


def _declaration_form_data(declaration: dict[str, Any]) -> QueryDict:
    data = QueryDict(mutable=True)
    data["label"] = declaration["label"]
    data["positive"] = declaration["positive"]
    data.setlist("attributes", list(declaration["attributes"]))
    data["unknown_tokens"] = ", ".join(token for token in declaration["unknown_tokens"] if token)
    data.setlist("features", list(declaration["features"] or []))
    data["confirm_groups"] = "on"  # confirmed when it was submitted
    return data


@login_required
@require_GET
def dataset_staged_status(request: HttpRequest, staged_id: str) -> JsonResponse:
    """What the worker does with an upload: the waiting page polls this."""
    staged = selectors.staged_upload_get(user=request_user(request), staged_id=str(staged_id))
    return JsonResponse(
        {
            "status": staged.status,
            "progress": staged.progress,
            "progress_at": staged.progress_at.isoformat() if staged.progress_at else None,
            "error": staged.error or None,
        }
    )


@login_required
@require_POST
def dataset_discard(request: HttpRequest, staged_id: str) -> HttpResponse:
    user = request_user(request)
    staged = selectors.staged_upload_get(user=user, staged_id=str(staged_id))
    try:
        services.staged_upload_discard(staged=staged)
    except services.StagedUploadBusy as exc:
        messages.error(request, str(exc))
        return redirect("datasets:declare", staged_id=staged.pk)
    messages.info(request, f"Discarded the upload of {staged.original_name}.")
    return redirect("home")


@login_required
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    user = request_user(request)
    dataset = selectors.dataset_get(user=user, dataset_id=dataset_id)
    latest = selectors.dataset_version_list(user=user, dataset=dataset).first()
    if latest is None:
        # A steward change refused while the dataset has no version comes back here (303).
        failed = form_failed_restore(request)
        if failed is not None and failed.name == "stewards":
            _failed_as_messages(request, failed)
        return render(request, "datasets/empty.html", {"dataset": dataset})
    return redirect("datasets:version", version_id=latest.pk)


@login_required
def dataset_version_detail(request: HttpRequest, version_id: int) -> HttpResponse:
    user = request_user(request)
    version = selectors.dataset_version_get(user=user, version_id=version_id)
    retire_form: RetireForm | None = None
    steward_form: StewardForm | None = None
    # A form refused on its POST-only URL (retire, stewards) comes back here (303) with its errors.
    failed = form_failed_restore(request)
    if failed is not None and failed.name == "retire":
        if version.is_retired:  # retired meanwhile (the refusal says by whom): no form to show it on
            _failed_as_messages(request, failed)
        else:
            retire_form = failed.bind(RetireForm(failed.data))
    elif failed is not None and failed.name == "stewards":
        steward_form = failed.bind(StewardForm(failed.data))
    return _version_page(request, version, retire_form=retire_form, steward_form=steward_form)


def _failed_as_messages(request: HttpRequest, failed: FailedForm) -> None:
    """The errors of a form that the page no longer shows, as messages above the page."""
    for errors in failed.errors.values():
        for error in errors:
            messages.error(request, error)


def _version_page(
    request: HttpRequest,
    version: DatasetVersion,
    *,
    retire_form: RetireForm | None = None,
    steward_form: StewardForm | None = None,
) -> HttpResponse:
    user = request_user(request)
    return render(
        request,
        "datasets/version.html",
        {
            "version": version,
            "attributes": version.attributes.order_by("position"),
            "group_tables": _group_tables(version),
            "versions": selectors.dataset_version_list(user=user, dataset=version.dataset),
            "integrity": selectors.dataset_version_integrity_latest(version=version),
            "can_check": rules.can_check_integrity(user),
            "can_retire": rules.can_retire(user, version.dataset),
            "stewards": version.dataset.steward_names(),
            "retire_form": retire_form or RetireForm(),
            "can_manage_stewards": rules.can_manage_stewards(user),
            "steward_form": steward_form or StewardForm(initial={"action": "add"}),
        },
    )


def _group_tables(version: DatasetVersion) -> list[tuple[selectors.GroupTable, str, dict[str, Any] | None]]:
    """Each attribute's (and the intersection's) table with its figure (rows and positive rates) and
    the id of the figure's JSON on the page."""
    tables = []
    for index, table in enumerate(selectors.dataset_version_group_tables(version=version), start=1):
        figure = kept_figure_json(
            group_summary_figure,
            table.rows,
            columns=table.columns,
            total_rows=version.num_rows,
            overall_rate=version.positive_rate,
            alpha=selectors.POSITIVE_RATE_ALPHA,
        )
        tables.append((table, f"group-figure-{index}", figure))
    return tables


@login_required
@require_POST
def dataset_version_check(request: HttpRequest, version_id: int) -> HttpResponse:
    user = request_user(request)
    version = selectors.dataset_version_get(user=user, version_id=version_id)
    rules.check_check_integrity(user)
    try:
        services.dataset_version_check_integrity(version=version, actor=user, purpose=IntegrityPurpose.MANUAL)
    except services.DatasetIntegrityError:
        # The page's banner says what differs.
        messages.error(request, f"The stored file of {version} failed its integrity check.")
    else:
        messages.success(request, f"The stored file of {version} still has its registered SHA-256.")
    return redirect("datasets:version", version_id=version.pk)


@login_required
@require_POST
def dataset_version_retire(request: HttpRequest, version_id: int) -> HttpResponse:
    user = request_user(request)
    version = selectors.dataset_version_get(user=user, version_id=version_id)
    form = RetireForm(request.POST)
    if form.is_valid():
        try:
            services.dataset_version_retire(user=user, version=version, reason=form.cleaned_data["reason"])
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Retired {version}.")
            return redirect("datasets:version", version_id=version.pk)
    # Back to the version's page (303) with the errors: the address bar never rests on the POST-only URL.
    return form_failed_redirect(
        request, url=reverse("datasets:version", kwargs={"version_id": version.pk}), name="retire", form=form,
        anchor="#retire",
    )  # fmt: skip


@login_required
@require_POST
def dataset_stewards(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """An administrator adds (``action=add``) or removes (``action=remove``) one of a dataset's stewards."""
    user = request_user(request)
    dataset = selectors.dataset_get(user=user, dataset_id=dataset_id)
    rules.check_manage_stewards(user)
    form = StewardForm(request.POST)
    if form.is_valid():
        username, action = form.cleaned_data["username"].strip(), form.cleaned_data["action"]
        steward = User.objects.filter(username=username).first()
        try:
            if steward is None:
                raise UserError(f"No user named {username!r}.", field="username")
            if action == "add":
                services.dataset_steward_add(dataset=dataset, user=steward, actor=user)
                messages.success(request, f"{steward.username} is now a steward of {dataset.name}.")
            else:
                services.dataset_steward_remove(dataset=dataset, user=steward, actor=user)
                messages.success(request, f"{steward.username} is no longer a steward of {dataset.name}.")
        except UserError as exc:
            form.add_error("username", str(exc))
        else:
            return redirect("datasets:detail", dataset_id=dataset.pk)
    # Back to the dataset's page (303: its latest version's) with the errors: the address bar never rests
    # on the POST-only URL.
    latest = selectors.dataset_version_list(user=user, dataset=dataset).first()
    if latest is None:
        return form_failed_redirect(
            request, url=reverse("datasets:detail", kwargs={"dataset_id": dataset.pk}), name="stewards", form=form
        )
    return form_failed_redirect(
        request, url=reverse("datasets:version", kwargs={"version_id": latest.pk}), name="stewards", form=form,
        anchor="#steward-add",
    )  # fmt: skip
