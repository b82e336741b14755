from django.contrib import admin
from django.urls import path

from example_project.example import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("connect/<str:elicitation_id>/", views.connect, name="connect"),
]
