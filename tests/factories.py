# factory_boy ships no type information for its declarations; the typed entry points are make_user()
# and each factory's create() classmethod (calling a factory class reads to mypy as the factory itself).
# mypy: disable-error-code="attr-defined,misc,no-untyped-call"
from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import factory
from django.conf import settings
from django.db.models import Max
from django.test import Client

from auditportal.accounts.models import Role, RoleGrant, User
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit
from auditportal.datasets import demo
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import configs
from auditportal.experiments.models import Backend, Experiment, Template, Trial
from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS, DatasetSpec
from auditportal.fairness.statistics.audit import AuditSpec
from tests.audits.conftest import PREDICTIONS_CSV
from tests.datasets.conftest import SMALL_CSV

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.org")

    @factory.post_generation
    def password(self, create: bool, extracted: str | None, **kwargs: Any) -> None:
        self.set_password(extracted or PASSWORD)
        if create:
            self.save(update_fields=["password"])

    @factory.post_generation
    def roles(self, create: bool, extracted: list[Role] | None, **kwargs: Any) -> None:
        for role in extracted or []:
            RoleGrant.objects.create(user=self, role=role)
        self.forget_roles()


def make_user(username: str, roles: Iterable[Role] = (), password: str = PASSWORD) -> User:
    return cast(User, UserFactory(username=username, roles=list(roles), password=password))


class _RegisteredVersionFactory(factory.django.DjangoModelFactory[DatasetVersion]):
    """A version registered by the registration service from a real file, as a steward registers one.

    The file (what ``write`` puts at the path it is given) and the declaration (``spec``) are the
    inputs; what the service derives from them (rows, counts, hash, groups, storage path) cannot be
    set, so a version always matches its stored file. The store is ``settings.DATASET_STORAGE_DIR``:
    use the ``dataset_storage`` fixture for a private one.
    """

    class Meta:
        abstract = True

    created_by = factory.SubFactory(UserFactory, roles=[Role.DATA_STEWARD])

    @classmethod
    def _create(
        cls,
        model_class: type[DatasetVersion],
        *,
        created_by: User,
        name: str,
        original_name: str,
        spec: DatasetSpec,
        write: Callable[[Path], object],
    ) -> DatasetVersion:
        with tempfile.TemporaryDirectory(prefix="dataset-factory-") as directory:
            path = Path(directory) / original_name
            write(path)
            return dataset_services.dataset_version_register(
                user=created_by, source=path, original_name=original_name, name=name, spec=spec
            )


class DatasetVersionFactory(_RegisteredVersionFactory):
    """SMALL_CSV (8 loan decisions) or another CSV text given as ``content``."""

    class Meta:
        model = DatasetVersion

    class Params:
        content = SMALL_CSV

    name = factory.Sequence(lambda n: f"loans-{n}")
    original_name = "loans.csv"
    spec = DatasetSpec(label="approved", positive="1", attributes=("gender", "age_group"))
    write = factory.LazyAttribute(lambda o: functools.partial(Path.write_text, data=o.content, encoding="utf-8"))


class DemoDatasetVersionFactory(_RegisteredVersionFactory):
    """The seeded demo credit dataset (auditportal.datasets.demo), declared as make_demo_dataset does."""

    class Meta:
        model = DatasetVersion

    class Params:
        rows = 400
        seed = demo.DEFAULT_SEED

    name = "credit-demo"
    original_name = factory.LazyAttribute(lambda o: f"credit-demo-{o.rows}-seed{o.seed}.csv")
    spec = factory.LazyFunction(
        lambda: DatasetSpec(
            label=demo.LABEL,
            positive="1",
            attributes=("gender", "age_group"),
            unknown_tokens=DEFAULT_UNKNOWN_TOKENS,
            max_groups=settings.DATASET_MAX_GROUPS,
        )
    )
    write = factory.LazyAttribute(lambda o: functools.partial(demo.write_demo_csv, rows=o.rows, seed=o.seed))


class ExperimentFactory(factory.django.DjangoModelFactory[Experiment]):
    """An experiment as experiment_create stores it (space, period, shard folder and config derived
    the same way), but without queuing its launch: nothing runs unless the test launches it."""

    class Meta:
        model = Experiment

    dataset_version = factory.SubFactory(DatasetVersionFactory)
    launched_by = factory.SubFactory(UserFactory, roles=[Role.ML_ENGINEER])
    name = factory.Sequence(lambda n: f"experiment-{n}")
    template = Template.SINGLE
    backend = Backend.LOCAL
    batches = 10
    max_trials = factory.LazyAttribute(lambda o: 1 if o.template == Template.SINGLE else 4)
    hparam_space = factory.LazyAttribute(lambda o: configs.space_build(o.template, None))
    validation_period = factory.LazyAttribute(lambda o: configs.validation_period(o.template, o.batches))
    max_concurrent_trials = factory.LazyAttribute(
        lambda o: (
            1
            if o.template == Template.SINGLE
            else configs.default_max_concurrent_trials(
                backend=o.backend, slots_per_trial=1, local_slots=settings.EXPERIMENT_LOCAL_CONCURRENCY
            )
        )
    )
    shard_dir = factory.LazyAttribute(
        lambda o: str(dataset_services.shard_dir_default(version=o.dataset_version, parts=1, seed=0))
    )
    config_yaml = factory.LazyAttribute(
        lambda o: configs.to_yaml(
            configs.experiment_config(
                name=o.name,
                template=o.template,
                space=o.hparam_space,
                max_trials=o.max_trials,
                batches=o.batches,
                shard_host_dir=settings.SHARD_HOST_DIR or str(settings.SHARD_DIR),
                shard_folder=Path(o.shard_dir).name,
                dataset_sha256=o.dataset_version.sha256,
                image=settings.DET_TRAINER_IMAGE,
                max_concurrent_trials=o.max_concurrent_trials,
            )
        )
    )


def _next_trial_number(experiment: Experiment) -> int:
    return int(experiment.trials.aggregate(top=Max("number"))["top"] or 0) + 1


class TrialFactory(factory.django.DjangoModelFactory[Trial]):
    """The next trial of its experiment as the local backend plans it: its draw from the
    experiment's space and every batch planned."""

    class Meta:
        model = Trial

    experiment = factory.SubFactory(ExperimentFactory)
    number = factory.LazyAttribute(lambda o: _next_trial_number(o.experiment))
    hparams = factory.LazyAttribute(
        lambda o: configs.sample(o.experiment.hparam_space, o.number, seed=o.experiment.pk)[o.number - 1]
    )
    steps_planned = factory.LazyAttribute(lambda o: o.experiment.batches)


class PredictionAuditFactory(factory.django.DjangoModelFactory[PredictionAudit]):
    """An audit run by the audit service on a real predictions file (``content``), which is not kept;
    the document, verdict, hash and counts are the service's."""

    class Meta:
        model = PredictionAudit

    created_by = factory.SubFactory(UserFactory, roles=[Role.ML_ENGINEER])
    original_name = "scores.csv"
    content = PREDICTIONS_CSV
    spec = AuditSpec(label="label", prediction="pred", attributes=("gender",))

    @classmethod
    def _create(
        cls, model_class: type[PredictionAudit], *, created_by: User, original_name: str, spec: AuditSpec, content: str
    ) -> PredictionAudit:
        with tempfile.TemporaryDirectory(prefix="audit-factory-") as directory:
            path = Path(directory) / original_name
            path.write_text(content, encoding="utf-8")
            return audit_services.prediction_audit_run(
                user=created_by, source=path, original_name=original_name, spec=spec
            )


def client_for(user: User) -> Client:
    """A test client with ``user`` logged in."""
    client = Client()
    client.force_login(user)
    return client
