from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from example_project.example import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("connect/<str:elicitation_id>/", views.connect, name="connect"),
]

if settings.OAUTH:
    from oauth2_provider import urls as oauth_urls

    # The toolkit's metadata (RFC 8414) at the root, so the issuer is this origin; its endpoints under o/.
    toolkit = ([*oauth_urls.metadata_urlpatterns,
                path("o/", include(oauth_urls.base_urlpatterns + oauth_urls.dcr_urlpatterns
                                   + oauth_urls.management_urlpatterns))], "oauth2_provider")
    urlpatterns += [
        path("", include(toolkit)),
        path("accounts/login/", auth_views.LoginView.as_view(
            template_name="admin/login.html", extra_context={"site_header": "Sign in to authorize an MCP client"})),
    ]
