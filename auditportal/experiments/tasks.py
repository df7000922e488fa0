from __future__ import annotations

from auditportal.celery import app
from auditportal.experiments import services
from auditportal.experiments.models import Experiment, ExperimentStatus


@app.task(name="experiments.launch", acks_late=True)  # type: ignore[untyped-decorator]
def experiment_launch_task(experiment_id: int) -> None:
    # Claim: only the worker that moves it out of QUEUED launches it (redelivery is harmless).
    claimed = Experiment.objects.filter(pk=experiment_id, status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.LAUNCHING
    )
    if claimed != 1:
        return
    services.experiment_launch(experiment=Experiment.objects.get(pk=experiment_id))


@app.task(name="experiments.poll_active", ignore_result=True)  # type: ignore[untyped-decorator]
def experiments_poll_active_task() -> int:
    return services.experiments_poll_active()
