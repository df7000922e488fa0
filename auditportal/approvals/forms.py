"""The approval pages' forms (templates/approvals/). They parse what was posted; the services decide
whether it is allowed and say what is wrong, in the same words as the API (lib/forms.add_user_error).
Fields the services check are not required here, so an empty one gets the service's message."""

from __future__ import annotations

from typing import Any

from django import forms

from auditportal.approvals.models import VoteChoice
from auditportal.approvals.selectors import FindingStatus, RequestSubject
from auditportal.evidence.models import VerdictDocument


class _AnyChoices(forms.MultipleChoiceField):
    """Choices the service checks (it names the value and the field when one is not the request's)."""

    def valid_value(self, value: Any) -> bool:
        return True


def _textarea(rows: int = 3) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows})


def _document_label(document: VerdictDocument) -> str:
    step = f"step {document.step}, " if document.step is not None else ""
    verdict = document.document.get("verdict") or "no verdict"
    return f"{document.short_hash} ({step}policy v{document.policy.version}, {verdict})"


class _DocumentsField(forms.TypedMultipleChoiceField):
    def __init__(self, documents: list[VerdictDocument], **kwargs: Any) -> None:
        super().__init__(
            coerce=int,
            choices=[(document.pk, _document_label(document)) for document in documents],
            widget=forms.CheckboxSelectMultiple,
            required=False,
            label="Frozen verdict documents",
            help_text="What the committee signs: every document must judge this subject under one policy version.",
            **kwargs,
        )


def _chosen(documents: list[VerdictDocument], ids: list[int]) -> list[VerdictDocument]:
    return [document for document in documents if document.pk in set(ids)]


class ReviewRequestCreateForm(forms.Form):
    title = forms.CharField(max_length=200, required=False, label="Title")
    intended_use = forms.CharField(
        required=False,
        label="Intended use",
        widget=_textarea(),
        help_text="Who the model decides about, and for what: the committee judges the evidence against it.",
    )
    model_identifier = forms.CharField(
        max_length=255,
        required=False,
        label="Model identifier",
        help_text="What deployment pipelines ask the gate about, e.g. a Determined checkpoint UUID or name:version.",
    )

    def __init__(self, *args: Any, subject: RequestSubject, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subject = subject
        self.fields["documents"] = _DocumentsField(subject.documents, initial=[d.pk for d in subject.chosen])
        if subject.trial is not None:
            self.fields[
                "model_identifier"
            ].help_text += f" Leave it empty to use the trial's checkpoint ({subject.trial.checkpoint or 'none yet'})."
        if subject.paired_comparison is not None:
            self.fields["model_identifier"].help_text += (
                " The model approved is the challenger, which would replace the champion; leave it empty to use "
                "the challenger's column name."
            )
        if not self.is_bound:
            self.initial.setdefault("title", subject.suggested_title)
            if subject.paired_comparison is not None:
                self.initial.setdefault("model_identifier", subject.paired_comparison.challenger)

    def clean_documents(self) -> list[VerdictDocument]:
        return _chosen(self.subject.documents, self.cleaned_data["documents"])


class ReviewRequestReviseForm(forms.Form):
    title = forms.CharField(max_length=200, required=False, label="Title")
    intended_use = forms.CharField(required=False, label="Intended use", widget=_textarea())

    def __init__(self, *args: Any, documents: list[VerdictDocument], chosen: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.available = documents
        self.fields["documents"] = _DocumentsField(documents, initial=chosen)

    def clean_documents(self) -> list[VerdictDocument]:
        return _chosen(self.available, self.cleaned_data["documents"])


class ReasonForm(forms.Form):
    """Request changes, withdraw, revoke: the reason goes into the event and the mail."""

    reason = forms.CharField(required=False, label="Reason", widget=_textarea(2))


class RecommendForm(forms.Form):
    prefix = "recommend"
    choice = forms.ChoiceField(
        choices=VoteChoice.choices,
        widget=forms.RadioSelect,
        label="Recommendation",
        error_messages={
            "required": "Choose a recommendation: approve or reject.",
            "invalid_choice": "Choose approve or reject.",
        },
    )
    reason = forms.CharField(required=False, label="Why", widget=_textarea(2))


class CommentForm(forms.Form):
    body = forms.CharField(required=False, label="Comment", widget=_textarea(3))
    parent = forms.IntegerField(required=False, widget=forms.HiddenInput)


class _SignedVoteForm(forms.Form):
    """A vote is a signature: the voter's password again, and the documents' SHA-256s as the page showed them."""

    choice = forms.ChoiceField(
        choices=VoteChoice.choices,
        widget=forms.RadioSelect,
        label="Vote",
        error_messages={
            "required": "Choose your vote: approve or reject.",
            "invalid_choice": "Choose approve or reject.",
        },
    )
    reason = forms.CharField(
        required=False, label="Reason", widget=_textarea(2), help_text="Required, for approve and reject."
    )
    password = forms.CharField(
        required=False,
        strip=False,
        label="Your password",
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="Entering it again signs the vote (it is checked now, not taken from your session).",
    )
    # What the page showed; the service compares them with the request's and says when they differ.
    document_sha256 = _AnyChoices(required=False, widget=forms.MultipleHiddenInput)

    def __init__(self, *args: Any, hashes: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["document_sha256"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.initial = hashes
        field.choices = [(h, h) for h in hashes]


class VoteForm(_SignedVoteForm):
    """A vote; with INCONCLUSIVE comparisons, one box acknowledges all of those the page listed (their
    keys travel as hidden inputs: a list that changed since the page loaded is refused)."""

    acknowledge_all = forms.BooleanField(required=False)
    # The keys of the INCONCLUSIVE comparisons the page listed.
    acknowledged = _AnyChoices(required=False, widget=forms.MultipleHiddenInput)

    def __init__(self, *args: Any, hashes: list[str], inconclusive: list[FindingStatus], **kwargs: Any) -> None:
        super().__init__(*args, hashes=hashes, **kwargs)
        self.inconclusive = [status.finding.key for status in inconclusive]
        field = self.fields["acknowledged"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.initial = self.inconclusive
        count = len(self.inconclusive)
        box = self.fields["acknowledge_all"]
        box.label = f"I acknowledge the {count:,} INCONCLUSIVE comparison{'' if count == 1 else 's'} listed above"
        box.help_text = (
            "An approving vote acknowledges every one of them: the data cannot yet tell whether they are fair. "
            "Your vote records each of them by name with the label positives it would need."
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        shown = list(data.get("acknowledged") or [])
        if not data.get("acknowledge_all"):
            data["acknowledged"] = []
        elif sorted(set(shown)) != sorted(set(self.inconclusive)):
            now, then = len(self.inconclusive), len(set(shown))
            self.add_error(
                "acknowledge_all",
                f"The INCONCLUSIVE comparisons changed since the page was loaded (it listed {then:,}; the request has "
                f"{now:,} now): read the list again, then vote.",
            )
        return data


class WaiverVoteForm(_SignedVoteForm):
    pass


class WaiverProposeForm(forms.Form):
    """One waiver of a set of FAIL comparisons: chosen with checkboxes, or (``hidden``) all of one
    attribute and metric, their keys in hidden inputs."""

    prefix = "waiver"
    finding_keys = _AnyChoices(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="FAIL comparisons to waive",
        help_text="One waiver covers all of them: one reason, one expiry, one vote of the committee.",
    )
    reason = forms.CharField(required=False, label="Why approve despite it", widget=_textarea(2))
    compensating_measures = forms.CharField(required=False, label="Compensating measures", widget=_textarea(2))
    expires_on = forms.DateField(
        label="Expires on",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="The waiver, and any approval resting on it, lapses at 00:00 UTC that day.",
        error_messages={
            "required": "Give the date the waiver expires.",
            "invalid": "Give the expiry date as YYYY-MM-DD.",
        },
    )

    def __init__(self, *args: Any, fails: list[FindingStatus], hidden: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["finding_keys"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(status.finding.key, status.finding.label) for status in fails]
        if hidden:
            field.widget = forms.MultipleHiddenInput()
            field.initial = [status.finding.key for status in fails]
