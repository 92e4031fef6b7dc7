from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page says; the API's root is its documentation.
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"), permanent=True)),
    path("api/v1/", RedirectView.as_view(pattern_name="api-v1:openapi-view"), name="api-root"),
    path("", include("engine.urls")),
]

# A database outage is a 503 with Retry-After (JSON for the API), not the 500 page.
handler500 = "provingsite.outage.server_error"
