"""URLs of the engine app: console, job pages, API, status and metrics."""

from django.urls import path

from engine import views

urlpatterns = [
    path("", views.console, name="console"),
]
