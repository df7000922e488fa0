from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.experiments import views

app_name = "experiments"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.experiment_index, name="index"),
    path("new/", views.experiment_new, name="new"),
    path("<int:experiment_id>/", views.experiment_detail, name="detail"),
    path("<int:experiment_id>/progress.json", views.experiment_progress, name="progress"),
    path("<int:experiment_id>/live/", views.experiment_live, name="live"),
    path("<int:experiment_id>/figures.json", views.experiment_figures, name="figures"),
    path("<int:experiment_id>/timeline.csv", views.experiment_timeline_csv, name="timeline-csv"),
    path("<int:experiment_id>/cancel/", views.experiment_cancel, name="cancel"),
]
